package lig

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// NoReplyText is what lig prints when no Map-Reply came, the words of the
// original lig.
const NoReplyText = "*** No map-reply received ***"

// WriteText prints the reply of r the way lig does (RFC 6835,
// dmm-lig, lispers.net): who answered and how fast, then each EID-record
// with its locators. A locator that is an Explicit Locator Path gets a
// line with its hops in order, each with its Lookup, RLOC-Probe and Strict
// bits, because that path is what the traffic will follow.
func WriteText(w io.Writer, r *Result) error {
	if r == nil || r.Reply == nil {
		return ErrNoReply
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Received map-reply from %s with rtt %.3f ms\n", hostPort(r), float64(r.RTT)/float64(time.Millisecond))
	if len(r.Reply.Records) == 0 {
		fmt.Fprintln(bw, "\nThe map-reply has no EID-records.")
	}
	for i := range r.Reply.Records {
		writeRecord(bw, r.EID, &r.Reply.Records[i])
	}
	return bw.Flush()
}

// hostPort is the replier's address, with the port only when it is not
// the control port the RFC has repliers send from.
func hostPort(r *Result) string {
	if r.Replier.Port() == Port {
		return r.Replier.Addr().String()
	}
	return r.Replier.String()
}

const locatorHeader = "  Locator                             State  Priority/Weight  M-Priority/M-Weight  Flags"

func writeRecord(w io.Writer, eid lisp.Address, rec *lisp.MapRecord) {
	fmt.Fprintf(w, "\nMapping entry for EID %s:\n", eid)
	auth := "not auth"
	if rec.Authoritative {
		auth = "auth"
	}
	fmt.Fprintf(w, "%s/%d, via map-reply, record ttl: %s, %s, map-version %d\n",
		rec.EID, rec.MaskLen, ttlText(rec.TTL), auth, rec.MapVersion)
	if len(rec.Locators) == 0 {
		fmt.Fprintf(w, "  negative cache entry, action: %s\n", rec.Action)
		return
	}
	fmt.Fprintln(w, locatorHeader)
	paths := false
	for _, l := range rec.Locators {
		rloc, elp := splitLocator(l.Address)
		name := "(path)"
		if !rloc.IsZero() {
			name = rloc.String()
		}
		state := "down"
		if l.Reachable {
			state = "up"
		}
		fmt.Fprintf(w, "  %-35s %-6s %-16s %-20s %s\n", name, state,
			fmt.Sprintf("%d/%d", l.Priority, l.Weight),
			fmt.Sprintf("%d/%d", l.MPriority, l.MWeight), locatorFlags(l))
		if elp != nil {
			paths = true
			fmt.Fprintf(w, "    elp %s\n", elpText(elp))
		}
	}
	if paths {
		fmt.Fprintln(w, "  (elp hop bits: L lookup, P rloc-probe, S strict)")
	}
}

// ttlText is a record TTL, in minutes on the wire.
func ttlText(ttl uint32) string {
	if ttl == lisp.TTLForever {
		return "forever (receiver decides)"
	}
	return fmt.Sprintf("%d mins", ttl)
}

// locatorFlags are the set L, p and R bits, in lispers.net's letters.
func locatorFlags(l lisp.Locator) string {
	var s strings.Builder
	for _, f := range []struct {
		set  bool
		name byte
	}{{l.Local, 'L'}, {l.Probed, 'p'}, {l.Reachable, 'R'}} {
		if f.set {
			s.WriteByte(f.name)
		}
	}
	if s.Len() == 0 {
		return "-"
	}
	return s.String()
}

// elpText is the path hop by hop, as "a(P) -> b(P,S) -> c".
func elpText(elp *lisp.ELP) string {
	hops := make([]string, len(elp.Hops))
	for i, h := range elp.Hops {
		hops[i] = h.String()
	}
	return strings.Join(hops, " -> ")
}

// splitLocator separates the RLOC and the Explicit Locator Path of a
// locator address. A path comes as an ELP LCAF alone (no RLOC), or in an
// AFI List next to the RLOC, or next to AFI 0 as lispers.net sends a
// locator that is only a path. Anything else is the RLOC itself, LCAFs
// included.
func splitLocator(a lisp.Address) (rloc lisp.Address, elp *lisp.ELP) {
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		return lisp.Address{}, l
	case *lisp.AFIList:
		var rest []lisp.Address
		for _, in := range l.Addresses {
			if e, ok := in.LCAF().(*lisp.ELP); ok && elp == nil {
				elp = e
			} else if !in.IsZero() {
				rest = append(rest, in)
			}
		}
		switch {
		case elp == nil:
			return a, nil
		case len(rest) == 1:
			return rest[0], elp
		case len(rest) > 1:
			return lisp.LCAFAddress(&lisp.AFIList{Addresses: rest}), elp
		}
		return lisp.Address{}, elp
	}
	return a, nil
}
