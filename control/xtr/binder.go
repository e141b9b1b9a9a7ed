package xtr

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// Stateful binding, the ETR's half ([LISP-TE] §IV.A, steps 5, 6, 8 and
// 10; mptcp-subflows bind-stateful). For each new subflow of a host of
// the site, the source's ITR asks with the subflow's flow as the EID
// (control.Flow); the ETR chooses its ELP among those its answer for that
// source would carry (the te role's set, else the configured locators):
// the one the fewest subflows of the same connection use, then the first
// by rank, then the one the fewest subflows use at all. It remembers the
// binding, answers with that ELP alone, and answers an RTR that asks the
// same. An RTR asking for a subflow that is not bound gets nothing (only
// the ITR binds). A binding ends with its subflow, as the ETR's own
// subflow table sees it (RST, FIN and a linger, idle), or, without the
// table, when nobody asked for it for its TTL.
//
// The connection of a subflow is the one the ETR's subflow table joined
// it to (MP_JOIN tokens). The request may come before the subflow's SYN
// (the two take different ways): the ETR waits for the SYN a moment
// before it chooses, and takes the source and destination hosts for the
// connection if it does not come.

// Binding lifetimes.
const (
	// bindingTTL is the TTL of a binding's answer, and how long a
	// binding lasts without a subflow table when nobody asks for it.
	bindingTTL = 10 * time.Minute
	// synWait is how long a request waits for its subflow's SYN.
	synWait = 250 * time.Millisecond
	// unseenTTL ends a binding whose subflow the table never had.
	unseenTTL = time.Minute
	// maxBindings bounds the table; past it, new subflows are not
	// bound (their ITR keeps its own choice).
	maxBindings = 65536
)

// binding is a subflow bound to an ELP.
type binding struct {
	flow    control.Flow
	elp     lisp.Locator
	key     string // the ELP's hops
	session uint64 // the connection in the subflow table; 0 while unknown
	seen    bool   // the subflow table has had it
	bound   time.Time
	asked   time.Time
	askers  []netip.Addr // the ITR, then RTRs
}

// waitingAnswer is a stateful request waiting for its subflow's SYN.
type waitingAnswer struct {
	flow     control.Flow
	m        *dbMapping
	rec      lisp.RequestRecord
	source   lisp.Address
	nonce    uint64
	to       netip.AddrPort
	deadline time.Time
}

// answerFlow answers a stateful request for a subflow of the site's
// host: with its binding, made now if the ITR asks and the subflow table
// has the subflow or cannot tell, later (from Tick) if it has not seen
// the SYN yet. The caller holds the lock.
func (x *XTR) answerFlow(req *lisp.MapRequest, f control.Flow, m *dbMapping, to netip.AddrPort, now time.Time, out *control.Outbox) RequestResult {
	rec := req.Records[0]
	if b := x.bindings[f]; b != nil {
		b.asked = now
		if !slices.Contains(b.askers, to.Addr()) && len(b.askers) < 8 {
			b.askers = append(b.askers, to.Addr())
		}
		x.sendBinding(b, rec, req.Nonce, to, out)
		return RequestBound
	}
	cands := x.candidates(x.recordFor(m, req.SourceEID, now))
	if onPath(cands.all, to.Addr()) {
		x.counter.rtrUnbound.Add(1)
		return RequestRTRUnbound
	}
	if len(cands.usable) == 0 || len(x.bindings) >= maxBindings {
		// Nothing to choose from: the mapping as for a plain request,
		// which binds nothing.
		x.sendRecord(x.recordFor(m, req.SourceEID, now), req.Nonce, to, out)
		return RequestAnswered
	}
	w := &waitingAnswer{flow: f, m: m, rec: rec, source: req.SourceEID, nonce: req.Nonce, to: to, deadline: now.Add(synWait)}
	session, known := x.session(f)
	if !known {
		x.waiting = append(x.waiting, w)
		x.counter.waited.Add(1)
		return RequestBound
	}
	b := x.bind(w, session, now)
	x.sendBinding(b, rec, req.Nonce, to, out)
	return RequestBound
}

// answerWaiting answers the stateful requests whose subflow's SYN came,
// or that waited long enough. The caller holds the lock; what to send is
// returned.
func (x *XTR) answerWaiting(now time.Time) []datagram {
	var out []datagram
	x.waiting = slices.DeleteFunc(x.waiting, func(w *waitingAnswer) bool {
		session, known := x.session(w.flow)
		if !known && now.Before(w.deadline) {
			return false
		}
		b := x.bindings[w.flow]
		if b == nil {
			b = x.bind(w, session, now)
		}
		var ob control.Outbox
		x.sendBinding(b, w.rec, w.nonce, w.to, &ob)
		for i := range ob.Len() {
			dst, msg := ob.At(i)
			out = append(out, datagram{dst, slices.Clone(msg)})
		}
		return true
	})
	return out
}

// session is the connection of f's subflow in the ETR's subflow table
// (seen from the site: the destination is local), and whether the table
// has it (or none can be asked).
func (x *XTR) session(f control.Flow) (uint64, bool) {
	if x.subflow == nil {
		return 0, true
	}
	sf, ok, err := x.subflow(dpFlow(f))
	if err != nil {
		return 0, true
	}
	return sf.Connection, ok
}

// dpFlow names f as the ETR's subflow table does.
func dpFlow(f control.Flow) dataplane.Flow {
	return dataplane.Flow{InstanceID: f.IID, Local: f.Dest, Remote: f.Source}
}

// bind chooses w's subflow's ELP and remembers it. The caller holds the
// lock.
func (x *XTR) bind(w *waitingAnswer, session uint64, now time.Time) *binding {
	cands := x.candidates(x.recordFor(w.m, w.source, now)).usable
	inSession, overall := map[string]int{}, map[string]int{}
	for _, b := range x.bindings {
		overall[b.key]++
		if sameSession(b, w.flow, session) {
			inSession[b.key]++
		}
	}
	best := slices.MinFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(inSession[a.key], inSession[b.key]), cmp.Compare(a.rank, b.rank),
			cmp.Compare(overall[a.key], overall[b.key]))
	})
	b := &binding{flow: w.flow, elp: best.loc, key: best.key, session: session, seen: session != 0,
		bound: now, asked: now, askers: []netip.Addr{w.to.Addr()}}
	x.bindings[w.flow] = b
	x.counter.bound.Add(1)
	x.log.Debug("subflow bound", "flow", w.flow, "elp", best.key, "connection", session)
	return b
}

// sameSession says whether b is of the connection of f's subflow: the
// same connection in the subflow table when both are known, else the same
// two hosts.
func sameSession(b *binding, f control.Flow, session uint64) bool {
	if b.session != 0 && session != 0 {
		return b.session == session
	}
	return b.flow.Source.Addr() == f.Source.Addr() && b.flow.Dest.Addr() == f.Dest.Addr() && b.flow.IID == f.IID
}

// candidate is an ELP a subflow may be bound to.
type candidate struct {
	loc  lisp.Locator
	key  string
	rank int
}

type candidates struct {
	usable []candidate    // of the best priority, by rank
	all    []lisp.Locator // every locator, to tell RTRs by
}

// candidates are the usable locators of the best priority of rec (R bit,
// priority below 255), ranked by weight (the te role's fall with the
// RTT), then order.
func (x *XTR) candidates(rec lisp.MapRecord) candidates {
	c := candidates{all: rec.Locators}
	best := 255
	for _, l := range rec.Locators {
		if l.Reachable && int(l.Priority) < best {
			best = int(l.Priority)
		}
	}
	for _, l := range rec.Locators {
		if l.Reachable && int(l.Priority) == best {
			c.usable = append(c.usable, candidate{loc: l, key: l.Address.String()})
		}
	}
	slices.SortStableFunc(c.usable, func(a, b candidate) int { return cmp.Compare(b.loc.Weight, a.loc.Weight) })
	for i := range c.usable {
		c.usable[i].rank = i
	}
	return c
}

// onPath says whether a is a hop of one of locs' ELPs before its last:
// an RTR of the mapping.
func onPath(locs []lisp.Locator, a netip.Addr) bool {
	for _, l := range locs {
		elp, ok := l.Address.LCAF().(*lisp.ELP)
		if !ok {
			continue
		}
		for _, h := range elp.Hops[:max(len(elp.Hops)-1, 0)] {
			if h.Address.IP().Unmap() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// sendBinding queues the answer with b's ELP: the record of the flow
// asked, its one locator, the binding's TTL.
func (x *XTR) sendBinding(b *binding, rec lisp.RequestRecord, nonce uint64, to netip.AddrPort, out *control.Outbox) {
	x.sendRecord(lisp.MapRecord{TTL: uint32(bindingTTL / time.Minute), EID: rec.EID, MaskLen: rec.MaskLen,
		Authoritative: true, Locators: []lisp.Locator{b.elp}}, nonce, to, out)
}

func (x *XTR) sendRecord(rec lisp.MapRecord, nonce uint64, to netip.AddrPort, out *control.Outbox) {
	reply := lisp.MapReply{Nonce: nonce, Records: []lisp.MapRecord{rec}}
	b, err := reply.AppendBinary(out.Begin())
	if err != nil { // records from the database and the request always encode
		x.log.Error("cannot encode Map-Reply", "to", to, "error", err)
		return
	}
	out.Commit(to, b)
}

// sweepBindings ends the bindings whose subflow the ETR's subflow table
// had and no longer has, or never had for unseenTTL; without the table,
// those nobody asked for in bindingTTL. The caller holds the lock.
func (x *XTR) sweepBindings(now time.Time) {
	for f, b := range x.bindings {
		sf, ok, err := x.subflowOf(f)
		switch {
		case err != nil:
			if now.Sub(b.asked) >= bindingTTL {
				delete(x.bindings, f)
				x.counter.expired.Add(1)
			}
		case ok:
			b.seen, b.session = true, cmp.Or(sf.Connection, b.session)
		case b.seen:
			delete(x.bindings, f)
			x.counter.ended.Add(1)
		case now.Sub(b.bound) >= unseenTTL:
			delete(x.bindings, f)
			x.counter.expired.Add(1)
		}
	}
}

func (x *XTR) subflowOf(f control.Flow) (dataplane.Subflow, bool, error) {
	if x.subflow == nil {
		return dataplane.Subflow{}, false, errNoTable
	}
	return x.subflow(dpFlow(f))
}

var errNoTable = errors.New("no subflow table")

// BindingStatus is a subflow bound to an ELP, as `lispd status` shows
// it.
type BindingStatus struct {
	Flow       string    `json:"flow"`
	ELP        string    `json:"elp"`
	Connection uint64    `json:"connection,omitempty"`
	Seen       bool      `json:"seen"`
	Bound      time.Time `json:"bound"`
	Askers     []string  `json:"askers"`
}

// bindingStatus lists the bindings by flow. The caller holds the lock.
func (x *XTR) bindingStatus() []BindingStatus {
	var out []BindingStatus
	for _, b := range x.bindings {
		bs := BindingStatus{Flow: b.flow.String(), ELP: b.key, Connection: b.session, Seen: b.seen, Bound: b.bound}
		for _, a := range b.askers {
			bs.Askers = append(bs.Askers, a.String())
		}
		out = append(out, bs)
	}
	slices.SortFunc(out, func(a, b BindingStatus) int { return strings.Compare(a.Flow, b.Flow) })
	return out
}
