package ddt

import (
	"log/slog"
	"net/netip"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// The TTLs of Map-Referral records, in minutes (RFC 8111 §6, the table
// of actions): positive referrals last a day, a delegation hole a
// quarter of an hour, an unregistered EID a minute, and a node that is
// not authoritative says so for this request only.
const (
	TTLReferral         = 1440
	TTLMSAck            = 1440
	TTLMSNotRegistered  = 1
	TTLDelegationHole   = 15
	TTLNotAuthoritative = 0
)

// Locators turns configured referral RLOCs into a referral set as
// Map-Referrals carry it: reachable, with their priorities and weights,
// and no multicast use.
func Locators(refs []config.Referral) []lisp.Locator {
	out := make([]lisp.Locator, len(refs))
	for i, r := range refs {
		out[i] = lisp.Locator{Priority: r.Priority, Weight: r.Weight, MPriority: 255, Reachable: true,
			Address: lisp.IPAddress(r.Addr())}
	}
	return out
}

// record builds a referral record for eid with the RFC's TTL and flags
// for action: authoritative but for NOT-AUTHORITATIVE, incomplete when
// the node does not know the whole referral set (always for
// NOT-AUTHORITATIVE, which carries none).
func record(eid mapping.EID, action lisp.ReferralAction, set []lisp.Locator, incomplete bool) lisp.ReferralRecord {
	a, maskLen := eid.Wire()
	rec := lisp.ReferralRecord{EID: a, MaskLen: maskLen, Action: action, Authoritative: true,
		Incomplete: incomplete, Referrals: set}
	switch action {
	case lisp.ReferralNode, lisp.ReferralMS:
		rec.TTL = TTLReferral
	case lisp.ReferralMSAck:
		rec.TTL = TTLMSAck
	case lisp.ReferralMSNotRegistered:
		rec.TTL = TTLMSNotRegistered
	case lisp.ReferralDelegationHole:
		rec.TTL = TTLDelegationHole
	case lisp.ReferralNotAuthoritative:
		rec.TTL, rec.Authoritative, rec.Incomplete, rec.Referrals = TTLNotAuthoritative, false, true, nil
	}
	return rec
}

// notAuthoritative is the answer for an EID outside every authoritative
// prefix: the EID exactly as requested (RFC 8111 §7.1).
func notAuthoritative(asked lisp.RequestRecord) lisp.ReferralRecord {
	return lisp.ReferralRecord{EID: asked.EID, MaskLen: asked.MaskLen, Action: lisp.ReferralNotAuthoritative,
		TTL: TTLNotAuthoritative, Incomplete: true}
}

// hole is the delegation hole around addr inside the authoritative
// prefix auth: the least-specific prefix there that overlaps nothing
// delegated. gap is that prefix in the whole address space, which a
// mapping.Table's Gap gives; inside auth it is at least as long as auth.
func hole(auth mapping.EID, gap mapping.EID, addr netip.Addr) mapping.EID {
	bits := max(gap.Prefix.Bits(), auth.Prefix.Bits())
	p, _ := addr.Prefix(bits)
	return mapping.EID{IID: auth.IID, Prefix: p}
}

// answer answers a DDT Map-Request with a Map-Referral to src, one record
// per EID asked, from refer; it counts what it sends and what it drops.
func answer(c *counters, log *slog.Logger, ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox,
	refer func(*lisp.MapRequest, lisp.RequestRecord) lisp.ReferralRecord) {
	c.requests.Add(1)
	req, reason, ok := request(ecm)
	if !ok {
		c.dropped[reason].Add(1)
		return
	}
	var buf [1]lisp.ReferralRecord
	recs := buf[:0]
	for _, r := range req.Records {
		recs = append(recs, refer(req, r))
	}
	if err := sendReferral(out, src, req.Nonce, recs); err != nil { // records of the tree always encode
		log.Error("cannot encode Map-Referral", "to", src, "error", err)
		return
	}
	c.referred(recs)
}

// request is the Map-Request of a DDT ECM and what its records ask, or
// why it cannot be answered.
func request(ecm *lisp.ECM) (*lisp.MapRequest, DropReason, bool) {
	req, ok := ecm.Message.(*lisp.MapRequest)
	switch {
	case !ok:
		return nil, NotMapRequest, false
	case len(req.Records) == 0:
		return nil, NoRecords, false
	}
	return req, 0, true
}

// askedEID reads the EID of a request record.
func askedEID(rec lisp.RequestRecord) (uint32, netip.Addr, bool) {
	iid, ip, ok := control.EIDOf(rec.EID)
	return iid, ip.Unmap(), ok
}

// authorities is a table of authoritative prefixes.
func authorities(list []config.ExtendedPrefix) *mapping.Table[mapping.EID] {
	t := mapping.NewTable[mapping.EID]()
	for _, e := range list {
		p, _ := netip.ParsePrefix(e.Prefix) // validated
		eid := mapping.NewEID(e.InstanceID, p)
		t.Insert(eid, eid)
	}
	return t
}

// sendReferral queues a Map-Referral with recs for the requester: the
// outer source of its DDT Map-Request, the map-resolver's control port.
func sendReferral(out *control.Outbox, to netip.AddrPort, nonce uint64, recs []lisp.ReferralRecord) error {
	m := lisp.MapReferral{Nonce: nonce, Records: recs}
	b, err := m.AppendBinary(out.Begin())
	if err != nil {
		return err
	}
	out.Commit(to, b)
	return nil
}
