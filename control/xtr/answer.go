package xtr

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// HandleRequest answers a Map-Request: one a map-server forwarded in an
// ECM (the xtr did not ask it to reply for it), one sent directly, or an
// RLOC probe. The Map-Reply echoes the nonce and carries, for each EID
// asked, the record of the longest database mapping that holds it, with
// the A bit (the ETR is authoritative), or the set the te role gave for
// the request's source EID (tesets.go). A stateful request for a
// subflow is answered with its binding (binder.go). A probe gets the probe bit, and
// for an EID outside the database (as RTRs get them: ITRs probe the hops
// of ELPs) a record of the EID with no locators and a TTL of 0, so that
// nothing caches it. The reply goes to the address the request came from
// if it is an ITR-RLOC, else to the first ITR-RLOC of its family, at
// replyPort: the inner UDP source port of an ECM, the source port of a
// direct request.
func (x *XTR) HandleRequest(req *lisp.MapRequest, replyPort uint16, src netip.AddrPort, out *control.Outbox) RequestResult {
	r := x.answer(req, replyPort, src, out)
	x.counter.requests[r].Add(1)
	return r
}

func (x *XTR) answer(req *lisp.MapRequest, replyPort uint16, src netip.AddrPort, out *control.Outbox) RequestResult {
	if len(req.Records) == 0 {
		return RequestNoRecords
	}
	itr, ok := replyAddr(req.ITRRLOCs, src.Addr())
	if !ok {
		return RequestNoITRRLOC
	}
	now := x.now()
	var records [2]lisp.MapRecord // the usual request has one
	reply := lisp.MapReply{Probe: req.Probe, Nonce: req.Nonce, Records: records[:0]}
	ours := false
	x.mu.Lock()
	if f, ok := control.FlowOf(req.Records[0].EID, req.SourceEID); ok && x.stateful && !req.Probe {
		if m, found := x.db.Lookup(f.IID, f.Dest.Addr()); found {
			r := x.answerFlow(req, f, m, netip.AddrPortFrom(itr, replyPort), now, out)
			if r != RequestRTRUnbound {
				x.remember(m.eid, itr, req.SourceEID, now)
			}
			x.mu.Unlock()
			return r
		}
	}
	for _, rec := range req.Records {
		iid, eid, ok := control.EIDOf(rec.EID)
		if !ok {
			continue
		}
		if m, found := x.db.Lookup(iid, eid.Unmap()); found {
			reply.Records = append(reply.Records, x.recordFor(m, req.SourceEID, now))
			ours = true
			if !req.Probe {
				x.remember(m.eid, itr, req.SourceEID, now)
			}
		} else if req.Probe {
			reply.Records = append(reply.Records, lisp.MapRecord{EID: rec.EID, MaskLen: rec.MaskLen})
		}
	}
	// Encoded under the lock: the records share the mappings' locators,
	// which Update replaces.
	var b []byte
	var err error
	if len(reply.Records) > 0 {
		b, err = reply.AppendBinary(out.Begin())
	}
	x.mu.Unlock()
	switch {
	case len(reply.Records) == 0:
		return RequestNotOurs
	case err != nil: // records from the database and the request always encode
		x.log.Error("cannot encode Map-Reply", "to", itr, "error", err)
		return RequestNotOurs
	}
	out.Commit(netip.AddrPortFrom(itr, replyPort), b)
	switch {
	case req.Probe && ours:
		return RequestProbe
	case req.Probe:
		return RequestProbeOther
	}
	return RequestAnswered
}

// replyAddr picks the ITR-RLOC to answer at: the address the request
// came from when it is one (a probe, sent directly), so that the answer
// takes the path back that the request took and a probe measures that
// locator's path alone; else the first ITR-RLOC of the request's family.
func replyAddr(itrRLOCs []lisp.Address, from netip.Addr) (netip.Addr, bool) {
	from = from.Unmap()
	for _, a := range itrRLOCs {
		if a.IP() == from {
			return from, true
		}
	}
	return control.ReplyAddr(itrRLOCs, from)
}

// itrKey is an ITR that asked for a mapping.
type itrKey struct {
	eid mapping.EID
	itr netip.Addr
}

// itr is what is kept of an ITR that asked for a mapping: an SMR goes to
// it when the mapping changes, naming its own EID when it gave one.
type itr struct {
	sourceIID uint32
	sourceEID netip.Addr // invalid if the request had none
	seen      time.Time
}

// The ITRs answered are remembered for itrMemory (their map-cache holds
// the mapping for its TTL, but one that did not ask again in that long is
// not likely to be using it), and at most maxITRs of them: past that, new
// ones are not remembered until old ones are forgotten.
const (
	itrMemory = 10 * time.Minute
	maxITRs   = 4096
)

// remember notes that itr asked for eid's mapping. The caller holds the
// lock.
func (x *XTR) remember(eid mapping.EID, addr netip.Addr, source lisp.Address, now time.Time) {
	k := itrKey{eid, addr}
	i := x.itrs[k]
	if i == nil {
		if len(x.itrs) >= maxITRs {
			return
		}
		i = &itr{}
		x.itrs[k] = i
	}
	i.sourceIID, i.sourceEID, _ = control.EIDOf(source)
	i.seen = now
}

// forgetITRs drops the ITRs not heard from in itrMemory. The caller holds
// the lock.
func (x *XTR) forgetITRs(now time.Time) {
	for k, i := range x.itrs {
		if now.Sub(i.seen) > itrMemory {
			delete(x.itrs, k)
		}
	}
}
