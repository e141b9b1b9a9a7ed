package lig

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// NoReferralText is what a trace prints when the first DDT node asked
// gave no Map-Referral.
const NoReferralText = "*** No map-referral received ***"

// WriteTraceText prints a trace: each Map-Referral, from the root down,
// after the request it answers, with who sent it, how fast, its action,
// prefix, TTL and flags and the referral set it names; then the Map-Reply, as WriteText prints it, or
// what the negative referral that ended the walk means.
func WriteTraceText(w io.Writer, r *Result) error {
	if r == nil || len(r.Hops) == 0 {
		return ErrNoReferral
	}
	bw := bufio.NewWriter(w)
	for _, h := range r.Hops {
		writeHop(bw, r.EID, h)
	}
	last := r.Hops[len(r.Hops)-1].Referral
	switch {
	case r.Reply != nil:
		bw.Flush()
		fmt.Fprintln(w)
		return WriteText(w, r)
	case last.Action == lisp.ReferralMSAck:
		fmt.Fprintln(bw, NoReplyText)
	case last.Action != lisp.ReferralNode && last.Action != lisp.ReferralMS:
		fmt.Fprintf(bw, "\nNo mapping for EID %s: %s\n", r.EID, negativeMeaning(last.Action))
	}
	// After a referral, the next level did not answer: the caller says so.
	return bw.Flush()
}

func writeHop(w io.Writer, eid lisp.Address, h Hop) {
	rec := h.Referral
	node := h.Node.Addr().String()
	if h.Node.Port() != Port {
		node = h.Node.String()
	}
	fmt.Fprintf(w, "Send DDT map-request to %s for %s ...", node, eid)
	if h.Tries > 1 {
		fmt.Fprintf(w, " (try %d at this level: no answer before)", h.Tries)
	}
	fmt.Fprintln(w)
	var flags []string
	if rec.Authoritative {
		flags = append(flags, "auth")
	}
	if rec.Incomplete {
		flags = append(flags, "incomplete")
	}
	fmt.Fprintf(w, "Received map-referral from %s with rtt %.3f ms: %s %s/%d, ttl %s",
		node, float64(h.RTT)/float64(time.Millisecond), rec.Action, rec.EID, rec.MaskLen, ttlText(rec.TTL))
	if len(flags) > 0 {
		fmt.Fprintf(w, ", %s", strings.Join(flags, ", "))
	}
	fmt.Fprintln(w)
	if len(rec.Referrals) > 0 {
		refs := make([]string, len(rec.Referrals))
		for i, l := range rec.Referrals {
			refs[i] = fmt.Sprintf("%s %d/%d", l.Address, l.Priority, l.Weight)
		}
		fmt.Fprintf(w, "  referrals: %s\n", strings.Join(refs, ", "))
	}
}

// negativeMeaning says what a negative referral tells an operator.
func negativeMeaning(a lisp.ReferralAction) string {
	switch a {
	case lisp.ReferralDelegationHole:
		return "a delegation hole, no site has it"
	case lisp.ReferralMSNotRegistered:
		return "its site has not registered it"
	case lisp.ReferralNotAuthoritative:
		return "the node asked is not authoritative for it"
	}
	return a.String()
}
