package pce

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/te"
)

// Engineer gives the mapping of a registered prefix for the one who
// asks (resolver.Engineer). When the prefix's xTR is the destination of
// sets, the record carries its ELPs in their slots: to a source xTR with
// a set, its ELPs usable (priority 1, weights falling with their RTT so
// that the first subflow takes the fastest) and the others at priority
// 255, which ITRs and `amptcp pm` do not use; to RTRs and anyone else,
// every ELP in use. A source's first request computes its set before the
// answer. Without ELPs, the registered mapping stands, with the TTL of
// the role's answers at most; for a prefix of no xTR the role knows,
// the registered mapping as it is.
func (e *Engine) Engineer(q resolver.Question) (lisp.MapRecord, bool) {
	t, p := e.ask(q)
	if t == nil {
		// A prefix registered since the role last read the
		// registrations, a moment ago: its ITR is solicited once the
		// role knows it, and asks again no later than the role's TTL.
		rec := q.Answer.Record
		rec.TTL = min(rec.TTL, uint32(e.cfg.TTL.Minutes()))
		return rec, true
	}
	e.mu.Lock()
	d := e.dest(t.name)
	if d.slots.Len() == 0 {
		// No ELPs yet: the registered mapping, for no longer than the
		// role's answers, so that the ITR asks again should an SMR be
		// lost when the ELPs come.
		e.mu.Unlock()
		rec := q.Answer.Record
		rec.TTL = min(rec.TTL, uint32(e.cfg.TTL.Minutes()))
		return rec, true
	}
	masked := p != nil && len(p.set) > 0
	rec := e.record(q.Answer.Record, d, p)
	e.mu.Unlock()
	if masked {
		e.counter.answersMasked.Add(1)
	} else {
		e.counter.answersAll.Add(1)
	}
	return rec, true
}

// ask learns what a Map-Request for a registered prefix says: the xTR
// the prefix is of, the pair of the source xTR that asks (its set
// computed at its first request), and the router that asked, which is
// solicited when the prefix's mapping changes. The registrations are
// read again when the role knows the prefix or the requester not: a
// site's first requests come right after it registers. It returns the
// xTR, nil for a prefix of no xTR the role knows, and the pair, nil when
// the requester is no source xTR.
func (e *Engine) ask(q resolver.Question) (*node, *pair) {
	now := e.now()
	who := requesterOf(q.Request, q.From)
	e.mu.Lock()
	defer e.mu.Unlock()
	t, src := e.byEID[q.Answer.EID], e.node(who)
	if (t == nil || src == nil) && now.Sub(e.learnt) >= relearn {
		e.mu.Unlock()
		e.learn()
		e.mu.Lock()
		t, src = e.byEID[q.Answer.EID], e.node(who)
	}
	at, replyable := control.ReplyAddr(q.Request.ITRRLOCs, q.From.Addr())
	a := asker{at.Unmap(), q.Answer.EID}
	if t == nil || src == nil {
		// The prefix's or the requester's site registered since the
		// role last read the registrations (or the requester is no
		// router of the overlay): taken in at the next reading, so that
		// an ITR is solicited when its ELPs come rather than keep the
		// registered mapping for the TTL.
		if replyable && len(e.unknown) < maxUnknown {
			e.unknown[a] = unknownAsk{who: who, seen: now}
		}
		if t == nil {
			return nil, nil
		}
	}
	var p *pair
	if src != nil && src.role == "xtr" && src != t {
		k := pairKey{src.name, t.name}
		if p = e.pairs[k]; p == nil {
			p = &pair{key: k, tracker: te.NewTracker(e.hyst)}
			e.pairs[k] = p
		}
		p.lastAsked = now
		if len(p.set) == 0 && now.Sub(p.computed) >= time.Second {
			e.mu.Unlock()
			e.Refresh(func(x *pair) bool { return x == p })
			e.mu.Lock()
		}
	}
	// Known routers are solicited when the mapping changes; this one
	// asks after any change its own request made.
	if src != nil && replyable {
		e.dest(t.name).askers[a] = now
	}
	return t, p
}

// record is the registered record with the destination's slots as its
// locators, the TTL of the role's answers, and p's ELPs the usable ones
// (every ELP in use when p is nil or has no set). A free slot inside the
// list keeps its position with the registration's first locator at
// priority 255, unreachable. The caller holds the lock.
func (e *Engine) record(reg lisp.MapRecord, d *dest, p *pair) lisp.MapRecord {
	rec := reg
	rec.TTL = uint32(e.cfg.TTL.Minutes())
	rank := map[int]int{}
	if p != nil {
		for r, i := range p.slots {
			rank[i] = r
		}
	}
	masked := len(rank) > 0
	slots := d.slots.All()
	rec.Locators = make([]lisp.Locator, len(slots))
	for i, sl := range slots {
		l := lisp.Locator{Priority: 255, MPriority: 255, Reachable: true}
		switch r, mine := rank[i]; {
		case sl.Key == "":
			l.Reachable = false
			if len(reg.Locators) > 0 {
				l.Address = reg.Locators[0].Address
			}
		case mine:
			l.Priority, l.Weight = 1, uint8(max(1, 50-r))
		case !masked && sl.Users > 0:
			l.Priority, l.Weight = 1, 1
		}
		if sl.Key != "" {
			l.Address = elpAddress(sl.Value.hops)
		}
		rec.Locators[i] = l
	}
	return rec
}

// elpAddress is an ELP's locator address: an ELP LCAF of its hops, each
// to be used (S) and probed (P), or the RLOC itself for a direct path.
func elpAddress(hops []netip.Addr) lisp.Address {
	if len(hops) == 1 {
		return lisp.IPAddress(hops[0])
	}
	elp := &lisp.ELP{Hops: make([]lisp.ELPHop, len(hops))}
	for i, h := range hops {
		elp.Hops[i] = lisp.ELPHop{Address: lisp.IPAddress(h), RLOCProbe: true, Strict: true}
	}
	return lisp.LCAFAddress(elp)
}

// relearn is how often a Map-Request for a prefix the role does not know
// may have it look at the registrations again.
const relearn = 100 * time.Millisecond

// maxUnknown bounds the routers remembered for prefixes the role does
// not know yet.
const maxUnknown = 4096

// unknownAsk is a request for a prefix, or from a requester, the role
// did not know: who sent it, and when.
type unknownAsk struct {
	who  requester
	seen time.Time
}

// adoptUnknown takes in the requests for prefixes, or from requesters,
// the role did not know, once it knows the prefix: their routers become
// askers of the destination, solicited when its ELPs come, and a source
// xTR's pair is made, to be computed at the next reading. Those whose
// prefix it still does not know after three TTLs are forgotten. The
// caller holds the lock.
func (e *Engine) adoptUnknown(now time.Time) {
	for a, u := range e.unknown {
		t := e.byEID[a.eid]
		if t == nil {
			if now.Sub(u.seen) > 3*e.cfg.TTL.Duration {
				delete(e.unknown, a)
			}
			continue
		}
		delete(e.unknown, a)
		e.dest(t.name).askers[a] = u.seen
		if src := e.node(u.who); src != nil && src.role == "xtr" && src != t {
			k := pairKey{src.name, t.name}
			if e.pairs[k] == nil {
				e.pairs[k] = &pair{key: k, tracker: te.NewTracker(e.hyst), lastAsked: u.seen}
			}
		}
	}
}
