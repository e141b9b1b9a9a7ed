// Package resolver is the map-resolver role of lispd (RFC 9301 §8.4): it
// takes the Encapsulated Map-Requests of ITRs, asks the mapping database,
// and answers with the mapping (a proxy Map-Reply), forwards the request
// to the ETR that answers for itself, or replies negatively with the
// largest prefix around the EID that holds nothing registered.
//
// The database is an interface: the local map-server's registrations. An
// EID it knows nothing of is resolved through LISP-DDT (RFC 8111) when
// the configuration names a root (ddt.go); without a local map-server,
// every EID is.
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
	wire            mapping.WireDatabase // db, when it is one
	negativeTTL     uint32               // minutes
	unregisteredTTL uint32
	limit           *limiter     // nil: no rate limit
	ddt             *ddtResolver // nil: no DDT
	engineer        Engineer     // nil: the mappings as registered
	log             *slog.Logger
	counter         counters
}

// Engineer gives, for the one who asks, the mapping a Map-Reply carries
// in place of the registered one: the te role's sets of ELPs. It says
// false to leave the registered mapping. It is told of the requests
// forwarded to ETRs that answer for themselves too (Forwarded), whose
// answers it cannot change but whose ETRs it may tell what to answer.
type Engineer interface {
	Engineer(q Question) (lisp.MapRecord, bool)
	Forwarded(q Question)
}

// Question is a Map-Request's record that the mapping system answers
// with a registered mapping: the mapping, the request and where it came
// from.
type Question struct {
	Answer  mapping.Answer
	Request *lisp.MapRequest
	From    netip.AddrPort
}

// SetEngineer makes e rewrite the mappings of proxy Map-Replies. Call it
// before the resolver serves.
func (r *Resolver) SetEngineer(e Engineer) { r.engineer = e }

// New returns a map-resolver that answers from db (nil: none) and, with
// cfg.DDT, through the DDT. A nil logger discards.
func New(cfg *config.MapResolver, db mapping.Database, log *slog.Logger, opts ...Option) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resolver{
		db:              db,
		negativeTTL:     minutes(cfg.NegativeTTL.Duration),
		unregisteredTTL: minutes(cfg.UnregisteredTTL.Duration),
		log:             log.With("component", "map-resolver"),
	}
	r.wire, _ = db.(mapping.WireDatabase)
	if rl := cfg.RateLimit; rl != nil && rl.PerSecond > 0 {
		r.limit = newLimiter(rl.PerSecond, rl.Burst)
	}
	if cfg.DDT != nil {
		r.ddt = newDDT(cfg.DDT, senderOf(opts), log.With("component", "ddt-resolver"))
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
	if r.wire != nil && r.engineer == nil && len(req.Records) == 1 && r.answerMapping(req, replyTo, out) {
		return
	}

	var room [4]mapping.Answer // the usual request asks for one EID
	answers := room[:0]
	forwarded := false
	for _, rec := range req.Records {
		iid, eid, ok := control.EIDOf(rec.EID)
		if !ok {
			r.counter.drop(UnsupportedEID)
			continue
		}
		ans := r.resolveLocal(iid, eid)
		switch ans.Kind {
		case mapping.Mapping:
			if r.engineer != nil {
				if own, ok := r.engineer.Engineer(Question{Answer: ans, Request: req, From: src}); ok {
					ans.Record, ans.Wire = own, nil
				}
			}
			r.counter.mappings.Add(1)
		case mapping.Forward:
			if r.engineer != nil {
				r.engineer.Forwarded(Question{Answer: ans, Request: req, From: src})
			}
			if !forwarded {
				r.forward(raw, ans.ETR, out)
				forwarded = true
			}
			continue
		case mapping.NotFound:
			if r.ddt != nil && !forwarded {
				// One DDT resolution per request: it carries the ECM.
				forwarded = true
				if neg, ok := r.ddt.resolve(raw, req, rec, iid, eid, replyTo, out); ok {
					ans.Record, ans.Wire = neg, nil
					answers = append(answers, ans)
					r.counter.negatives.Add(1)
				}
				continue
			}
			fallthrough
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

// answerMapping answers the usual Map-Request, for one EID that has a
// mapping, with the record the database keeps encoded, and reports
// whether it did: the path of most requests, which builds no Answer.
func (r *Resolver) answerMapping(req *lisp.MapRequest, replyTo netip.AddrPort, out *control.Outbox) bool {
	iid, eid, ok := control.EIDOf(req.Records[0].EID)
	if !ok {
		return false
	}
	reply := lisp.MapReply{Nonce: req.Nonce}
	b, err := reply.AppendHeader(out.Begin(), 1)
	if err != nil {
		return false
	}
	if b, ok = r.wire.AppendMapping(b, iid, eid); !ok {
		return false
	}
	out.Commit(replyTo, b)
	r.counter.mappings.Add(1)
	r.counter.replies.Add(1)
	return true
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
