package ddt

import (
	"log/slog"
	"net/netip"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// MapServer is a map-server as a DDT Map-Server (RFC 8111 §7.2): to a
// map-resolver's DDT Map-Request it does what a map-server does (forward
// the request to the ETR, or answer it for the ETR) and acknowledges with
// MS-ACK; for an EID of a site that nothing registered it answers
// MS-NOT-REGISTERED, for one in its authoritative prefixes but in no site
// DELEGATION-HOLE, and NOT-AUTHORITATIVE for the rest. It is safe for
// concurrent use.
type MapServer struct {
	db         mapping.Database
	auth       *mapping.Table[mapping.EID]
	peers      []lisp.Locator
	incomplete bool // no peers configured: the referral set is not known
	log        *slog.Logger
	counter    counters
}

// NewMapServer returns the DDT side of the map-server of a validated
// configuration, which answers from db (the map-server's registrations).
// A nil logger discards.
func NewMapServer(cfg *config.MapServer, db mapping.Database, log *slog.Logger) *MapServer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var auth []config.ExtendedPrefix
	var peers []config.Referral
	if cfg.DDT != nil {
		auth, peers = cfg.DDT.AuthoritativePrefixes, cfg.DDT.Peers
	}
	if len(auth) == 0 { // authoritative for the sites it serves
		for _, s := range cfg.Sites {
			for _, e := range s.EIDPrefixes {
				auth = append(auth, config.ExtendedPrefix{Prefix: e.Prefix, InstanceID: e.InstanceID})
			}
		}
	}
	return &MapServer{db: db, auth: authorities(auth), peers: Locators(peers), incomplete: len(peers) == 0,
		log: log.With("component", "ddt-map-server")}
}

// Authoritative reports whether the map-server is authoritative for the
// EID: a DDT Map-Request for it is the map-server's to answer.
func (m *MapServer) Authoritative(iid uint32, ip netip.Addr) bool {
	_, _, ok := m.auth.Covering(mapping.HostEID(iid, ip))
	return ok
}

// HandleECM answers the DDT Map-Request ecm (decoded from raw) that
// arrived from src: the Map-Reply or the forwarded request for the
// registered EIDs, and a Map-Referral to src.
func (m *MapServer) HandleECM(raw []byte, ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox) {
	answered := false
	answer(&m.counter, m.log, ecm, src, out, func(req *lisp.MapRequest, r lisp.RequestRecord) lisp.ReferralRecord {
		rec, ans, found := m.refer(r)
		// The D bit of the Map-Request (DontMapReply) asks for the
		// referral only, as rig does. One forward or reply per request.
		if found && !answered && !req.DontMapReply {
			answered = m.answer(raw, ecm, req, ans, src, out)
		}
		return rec
	})
}

// refer looks an EID up and says what the Map-Referral says of it, and
// whether the map-server has a registration to answer with.
func (m *MapServer) refer(asked lisp.RequestRecord) (lisp.ReferralRecord, mapping.Answer, bool) {
	iid, ip, ok := askedEID(asked)
	if !ok {
		return notAuthoritative(asked), mapping.Answer{}, false
	}
	ans := m.db.Resolve(iid, ip)
	switch ans.Kind {
	case mapping.Mapping, mapping.Forward:
		return record(ans.EID, lisp.ReferralMSAck, m.peers, m.incomplete), ans, true
	case mapping.Unregistered:
		return record(ans.EID, lisp.ReferralMSNotRegistered, m.peers, m.incomplete), ans, false
	}
	auth, _, ok := m.auth.Covering(mapping.HostEID(iid, ip))
	if !ok {
		return notAuthoritative(asked), ans, false
	}
	return record(hole(auth, ans.EID, ip), lisp.ReferralDelegationHole, nil, false), ans, false
}

// answer sends the proxy Map-Reply to the ITR, or forwards the request
// to the ETR, as the map-server does for a map-resolver of its own.
func (m *MapServer) answer(raw []byte, ecm *lisp.ECM, req *lisp.MapRequest, ans mapping.Answer,
	src netip.AddrPort, out *control.Outbox) bool {
	if ans.Kind == mapping.Forward {
		control.ForwardToETR(out, raw, ans.ETR)
		m.counter.forwarded.Add(1)
		return true
	}
	itr, ok := control.ReplyAddr(req.ITRRLOCs, src.Addr())
	if !ok {
		return false
	}
	reply := lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{ans.Record}}
	b, err := reply.AppendBinary(out.Begin())
	if err != nil {
		m.log.Error("cannot encode Map-Reply", "to", itr, "error", err)
		return false
	}
	out.Commit(netip.AddrPortFrom(itr, ecm.Source.Port()), b)
	m.counter.proxied.Add(1)
	return true
}

// Counters returns the current counters.
func (m *MapServer) Counters() Counters { return m.counter.snapshot() }
