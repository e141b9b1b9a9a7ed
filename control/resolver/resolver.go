// Package resolver is the map-resolver role of lispd (RFC 9301 §8.4): it
// takes the Encapsulated Map-Requests of ITRs, asks the mapping database,
// and answers with the mapping (a proxy Map-Reply), forwards the request
// to the ETR that answers for itself, or replies negatively with the
// largest prefix around the EID that holds nothing registered.
//
// The database is an interface: the local map-server's registrations now.
// A resolver that follows DDT referrals (RFC 8111) will add a database
// that answers later, keeping the pending requests by nonce; the reply
// paths here stay as they are.
package resolver

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Port is where LISP control messages go.
const Port = 4342

// Resolver is the map-resolver. It is safe for concurrent use.
type Resolver struct {
	db              mapping.Database
	negativeTTL     uint32 // minutes
	unregisteredTTL uint32
	limit           *limiter // nil: no rate limit
	log             *slog.Logger
	counter         counters
}

// New returns a map-resolver that answers from db. A nil logger discards.
func New(cfg *config.MapResolver, db mapping.Database, log *slog.Logger) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resolver{
		db:              db,
		negativeTTL:     minutes(cfg.NegativeTTL.Duration),
		unregisteredTTL: minutes(cfg.UnregisteredTTL.Duration),
		log:             log.With("component", "map-resolver"),
	}
	if rl := cfg.RateLimit; rl != nil && rl.PerSecond > 0 {
		r.limit = newLimiter(rl.PerSecond, rl.Burst)
	}
	return r
}

// minutes rounds a TTL up to the minutes a record carries.
func minutes(d time.Duration) uint32 { return uint32((d + time.Minute - 1) / time.Minute) }

// HandleECM answers the Encapsulated Control Message ecm (decoded from raw)
// that arrived from src, queueing what to send in out.
func (r *Resolver) HandleECM(raw []byte, ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox) {
	r.counter.requests.Add(1)
	if r.limit != nil && !r.limit.allow(src.Addr()) {
		r.counter.drop(RateLimited)
		return
	}
	req, ok := ecm.Message.(*lisp.MapRequest)
	if !ok {
		r.counter.drop(NotMapRequest)
		return
	}
	if len(req.Records) == 0 {
		r.counter.drop(NoRecords)
		return
	}
	itr, ok := replyAddr(req, src.Addr())
	if !ok {
		r.counter.drop(NoITRRLOC)
		return
	}
	replyTo := netip.AddrPortFrom(itr, ecm.Source.Port())

	var room [4]mapping.Answer // the usual request asks for one EID
	answers := room[:0]
	forwarded := false
	for _, rec := range req.Records {
		iid, eid, ok := requestedEID(rec.EID)
		if !ok {
			r.counter.drop(UnsupportedEID)
			continue
		}
		ans := r.db.Resolve(iid, eid)
		switch ans.Kind {
		case mapping.Mapping:
			r.counter.mappings.Add(1)
		case mapping.Forward:
			if !forwarded {
				r.forward(raw, ans.ETR, out)
				forwarded = true
			}
			continue
		default:
			ans.Record, ans.Wire = r.negative(ans), nil
			r.counter.negatives.Add(1)
		}
		answers = append(answers, ans)
	}
	if len(answers) == 0 {
		return
	}
	reply := lisp.MapReply{Nonce: req.Nonce}
	b, err := reply.AppendHeader(out.Begin(), len(answers))
	for i := 0; i < len(answers) && err == nil; i++ {
		if w := answers[i].Wire; w != nil {
			b = append(b, w...) // encoded once by the database
		} else {
			b, err = answers[i].Record.AppendBinary(b)
		}
	}
	if err != nil { // records from the database always encode
		r.log.Error("cannot encode Map-Reply", "to", replyTo, "error", err)
		return
	}
	out.Commit(replyTo, b)
	r.counter.replies.Add(1)
}

// negative is the record of a negative Map-Reply: the prefix the answer
// covers, no locators, and Natively-Forward (RFC 9301 §8.4), for 15
// minutes outside every site and 1 minute where a site may register soon.
func (r *Resolver) negative(ans mapping.Answer) lisp.MapRecord {
	eid, maskLen := ans.EID.Wire()
	ttl := r.negativeTTL
	if ans.Kind == mapping.Unregistered {
		ttl = r.unregisteredTTL
	}
	return lisp.MapRecord{TTL: ttl, EID: eid, MaskLen: maskLen, Action: lisp.ActionNativelyForward}
}

// forward sends the Encapsulated Map-Request, unchanged but for the E bit
// (to-ETR), to the ETR, which replies to the ITR itself.
func (r *Resolver) forward(raw []byte, etr netip.Addr, out *control.Outbox) {
	b := append(out.Begin(), raw...)
	b[len(b)-len(raw)] |= ecmToETR
	out.Commit(netip.AddrPortFrom(etr, Port), b)
	r.counter.forwarded.Add(1)
}

// ecmToETR is the E bit in the first byte of an ECM.
const ecmToETR = 0x02

// replyAddr picks the ITR-RLOC to answer: the first of the family the
// request came from (which we can send to), else the first.
func replyAddr(req *lisp.MapRequest, from netip.Addr) (netip.Addr, bool) {
	var first netip.Addr
	for _, a := range req.ITRRLOCs {
		ip := a.IP()
		if !ip.IsValid() {
			continue
		}
		if ip.Is4() == from.Unmap().Is4() {
			return ip, true
		}
		if !first.IsValid() {
			first = ip
		}
	}
	return first, first.IsValid()
}

// requestedEID reads the address a Map-Request record asks about.
func requestedEID(a lisp.Address) (uint32, netip.Addr, bool) {
	var iid uint32
	if l, ok := a.LCAF().(*lisp.InstanceID); ok {
		iid, a = l.IID, l.Address
	}
	ip := a.IP()
	return iid, ip, ip.IsValid()
}
