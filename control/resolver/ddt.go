package resolver

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// ddtResolver is the map-resolver's DDT client (RFC 8111 §7.3): an EID
// that no local site holds is resolved by sending the ITR's Encapsulated
// Map-Request, with the D bit, down the Delegated Database Tree: to the
// root, or to the longest referral the cache holds for it, then to each
// referral set a Map-Referral names, until a map-server acknowledges it
// (MS-ACK: the map-server has answered the ITR or forwarded the request to
// the ETR) or a negative referral says there is nothing, which the
// resolver answers the ITR with.
//
// An RLOC that does not answer within the request timeout is marked down
// and the next RLOC of its set is asked; a Map-Referral is followed only
// if it comes from an RLOC asked, for a pending nonce, covers the EID and,
// for a referral, is strictly more specific than the last one (RFC 8111
// §7.3.3): anything else is refused and counted by reason.
type ddtResolver struct {
	log          *slog.Logger
	now          func() time.Time
	send         control.Sender // for the retries of Tick; handlers use their Outbox
	port         uint16         // where DDT nodes listen: 4342
	timeout      time.Duration
	tries        int
	maxReferrals int
	root         *referral

	mu      sync.Mutex
	cache   *referralCache
	pending map[uint64]*pending
	due     deadlines.Queue[*pending]
	down    map[netip.Addr]time.Time
	counter ddtCounters
}

func newDDT(cfg *config.ResolverDDT, send control.Sender, log *slog.Logger) *ddtResolver {
	root := &referral{root: true, action: lisp.ReferralNode}
	for _, r := range cfg.Root {
		root.set = append(root.set, referralNode{addr: r.Addr(), priority: r.Priority, weight: r.Weight})
	}
	return &ddtResolver{
		log: log, now: time.Now, send: send, port: control.Port,
		timeout: cfg.RequestTimeout.Duration, tries: cfg.RequestTries, maxReferrals: cfg.MaxReferrals, root: root,
		cache: newReferralCache(cfg.CacheSize), pending: map[uint64]*pending{}, down: map[netip.Addr]time.Time{},
	}
}

// datagram is a message to send once the lock is released.
type datagram struct {
	dst netip.AddrPort
	b   []byte
}

// resolve starts resolving the EID of the record asked through the DDT.
// When a negative entry of the referral cache covers it, it returns the
// record of the negative Map-Reply to answer with at once instead.
func (d *ddtResolver) resolve(raw []byte, req *lisp.MapRequest, asked lisp.RequestRecord, iid uint32, eid netip.Addr,
	replyTo netip.AddrPort, out *control.Outbox) (lisp.MapRecord, bool) {
	now := d.now()
	d.counter.requests.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.pending[req.Nonce]; dup {
		d.counter.duplicates.Add(1)
		return lisp.MapRecord{}, false
	}
	step, cached := d.cache.lookup(iid, eid, now)
	switch {
	case cached && step.negative():
		d.counter.cacheNegative.Add(1)
		return negativeRecord(step.eid, ttlLeft(step.expires, now)), true
	case cached:
		d.counter.cachePositive.Add(1)
	default:
		step = d.root
	}
	if len(d.pending) >= maxPending {
		d.counter.overload.Add(1)
		return lisp.MapRecord{}, false
	}
	p := &pending{nonce: req.Nonce, raw: append([]byte(nil), raw...), iid: iid, eid: eid, asked: asked, replyTo: replyTo}
	d.pending[p.nonce] = p
	d.begin(p, step)
	if dg, ok := d.try(p, now); ok {
		out.AppendBytes(dg.dst, dg.b)
	}
	return lisp.MapRecord{}, false
}

// begin makes step's set the one p asks next.
func (d *ddtResolver) begin(p *pending, step *referral) {
	p.step, p.tries, p.notReg = step, map[netip.Addr]int{}, nil
}

// try sends p's DDT Map-Request to the next RLOC of its step, or gives p
// up when every RLOC had its tries. The caller holds the lock.
func (d *ddtResolver) try(p *pending, now time.Time) (datagram, bool) {
	addr, ok := d.next(p, now)
	if !ok {
		d.counter.exhausted.Add(1)
		d.log.Debug("DDT request given up: no RLOC of the referral set answered", "eid", p.eid, "iid", p.iid,
			"referral", p.step.describe(), "tries", d.tries)
		d.finish(p)
		return datagram{}, false
	}
	b := append([]byte(nil), p.raw...)
	b[0] = b[0]&^(ecmToETR|ecmToMS) | ecmDDT
	if p.step.toMapServers() {
		b[0] |= ecmToMS
	}
	p.tries[addr]++
	p.last = addr
	p.deadline = now.Add(d.timeout)
	d.due.Schedule(p)
	d.counter.sent.Add(1)
	return datagram{netip.AddrPortFrom(addr, d.port), b}, true
}

// The flags of the ECM header's first byte a DDT resolver sets: D (from
// a DDT client) and M (to a map-server); E is ecmToETR.
const (
	ecmDDT  = 0x04
	ecmToMS = 0x01
)

// finish forgets p. The caller holds the lock.
func (d *ddtResolver) finish(p *pending) {
	delete(d.pending, p.nonce)
	d.due.Remove(p)
}

// HandleReferral takes a Map-Referral that arrived from src: it follows
// it for the pending request with its nonce, queueing in out the next
// DDT Map-Request or the negative Map-Reply for the ITR.
func (d *ddtResolver) HandleReferral(raw []byte, src netip.AddrPort, out *control.Outbox) {
	var m lisp.MapReferral
	if err := m.DecodeFromBytes(raw); err != nil {
		d.refuse(RefusedMalformed, src, "error", err)
		return
	}
	now := d.now()
	from := src.Addr().Unmap()
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pending[m.Nonce]
	switch {
	case !ok:
		d.refuse(RefusedUnsolicited, src, "nonce", m.Nonce)
		return
	case p.tries[from] == 0:
		d.refuse(RefusedUnexpectedSource, src, "eid", p.eid)
		return
	case len(m.Records) == 0:
		delete(d.down, from)
		d.refuse(RefusedNoRecords, src, "eid", p.eid)
		return
	}
	delete(d.down, from) // it answers
	rec := &m.Records[0]
	key, err := mapping.FromWire(rec.EID, rec.MaskLen)
	switch {
	case err != nil:
		d.refuse(RefusedUnsupportedEID, src, "eid", p.eid, "record", rec.EID)
		return
	case key.IID != p.iid || !key.Prefix.Contains(p.eid):
		d.refuse(RefusedNotCovering, src, "eid", p.eid, "prefix", key)
		return
	case int(rec.Action) >= numReferralActions:
		d.refuse(RefusedUnknownAction, src, "eid", p.eid, "action", rec.Action.String())
		return
	}
	if dg, ok := d.follow(p, rec, key, from, now, out); ok {
		out.AppendBytes(dg.dst, dg.b)
	}
}

// follow acts on a referral record for p (RFC 8111 §7.3.2 and the
// pseudocode of §8.2), returning the next DDT Map-Request to send, if
// any. The caller holds the lock.
func (d *ddtResolver) follow(p *pending, rec *lisp.ReferralRecord, key mapping.EID, from netip.Addr, now time.Time,
	out *control.Outbox) (datagram, bool) {
	ttl := time.Duration(rec.TTL) * time.Minute
	entry := &referral{eid: key, action: rec.Action, set: nodesOf(rec.Referrals), source: from, expires: now.Add(ttl)}
	cacheable := !rec.Incomplete && rec.TTL > 0
	switch rec.Action {
	case lisp.ReferralNode, lisp.ReferralMS:
		switch {
		case len(entry.set) == 0:
			d.refuse(RefusedEmptySet, netip.AddrPortFrom(from, d.port), "eid", p.eid, "prefix", key)
			return datagram{}, false
		case !p.step.root && key.Prefix.Bits() <= p.step.eid.Prefix.Bits():
			d.abandon(p, RefusedLoop, from, key)
			return datagram{}, false
		case p.referrals >= d.maxReferrals:
			d.abandon(p, RefusedTooManyReferrals, from, key)
			return datagram{}, false
		}
		d.accept(p, rec.Action, from, key)
		p.referrals++
		if cacheable {
			d.store(entry)
		}
		d.begin(p, entry)
		return d.try(p, now)
	case lisp.ReferralMSAck:
		d.accept(p, rec.Action, from, key)
		if cacheable && len(entry.set) > 0 {
			d.store(entry)
		}
		d.counter.resolved.Add(1)
		d.finish(p)
	case lisp.ReferralMSNotRegistered:
		d.accept(p, rec.Action, from, key)
		if p.notReg == nil {
			p.notReg = map[netip.Addr]bool{}
		}
		p.notReg[from] = true
		// Another map-server of the set may have the registration.
		if p.step.toMapServers() {
			if dg, ok := d.tryOther(p, now); ok {
				return dg, true
			}
		}
		d.answerNegative(p, entry, cacheable, out)
	case lisp.ReferralDelegationHole:
		d.accept(p, rec.Action, from, key)
		d.answerNegative(p, entry, cacheable, out)
	case lisp.ReferralNotAuthoritative:
		d.accept(p, rec.Action, from, key)
		// A cached referral that led to a node no longer authoritative is
		// stale: drop it and ask from the root once more.
		if !p.step.root && !p.triedRoot {
			d.cache.remove(p.step)
			d.counter.stale.Add(1)
			d.log.Info("dropped a stale referral: its node is not authoritative", "prefix", p.step.eid, "node", from)
			p.triedRoot = true
			d.begin(p, d.root)
			return d.try(p, now)
		}
		host := mapping.HostEID(p.iid, p.eid)
		d.reply(p, negativeRecord(host, 0), out)
		d.finish(p)
	}
	return datagram{}, false
}

// tryOther asks a map-server of p's set that has not said
// MS-NOT-REGISTERED, if one is left.
func (d *ddtResolver) tryOther(p *pending, now time.Time) (datagram, bool) {
	if _, ok := d.next(p, now); !ok {
		return datagram{}, false
	}
	return d.try(p, now)
}

// answerNegative answers p's ITR with the negative referral's prefix and
// TTL, caches the referral and ends p.
func (d *ddtResolver) answerNegative(p *pending, entry *referral, cacheable bool, out *control.Outbox) {
	if cacheable {
		d.store(entry)
	}
	d.reply(p, negativeRecord(entry.eid, ttlLeft(entry.expires, d.now())), out)
	d.finish(p)
}

// store caches a referral, counting those the cache has no room for.
func (d *ddtResolver) store(r *referral) {
	if !d.cache.put(r) {
		d.counter.cacheFull.Add(1)
	}
}

// reply queues the negative Map-Reply for p's ITR.
func (d *ddtResolver) reply(p *pending, rec lisp.MapRecord, out *control.Outbox) {
	reply := lisp.MapReply{Nonce: p.nonce, Records: []lisp.MapRecord{rec}}
	b, err := reply.AppendBinary(out.Begin())
	if err != nil { // a prefix from a decoded record always encodes
		d.log.Error("cannot encode Map-Reply", "to", p.replyTo, "error", err)
		return
	}
	out.Commit(p.replyTo, b)
	d.counter.negatives.Add(1)
}

// accept notes a referral followed.
func (d *ddtResolver) accept(p *pending, action lisp.ReferralAction, from netip.Addr, key mapping.EID) {
	d.counter.referrals[action].Add(1)
	d.log.Debug("Map-Referral", "action", action.String(), "from", from, "prefix", key, "eid", p.eid, "iid", p.iid)
}

// abandon ends p on a referral error: the chain does not lead anywhere.
func (d *ddtResolver) abandon(p *pending, r RefusedReason, from netip.Addr, key mapping.EID) {
	d.counter.refused[r].Add(1)
	d.log.Warn("Map-Referral refused, request abandoned", "reason", r.String(), "from", from, "eid", p.eid,
		"iid", p.iid, "prefix", key, "after", p.step.describe(), "referrals", p.referrals)
	d.finish(p)
}

// refuse counts a Map-Referral not followed; the request, if any, waits
// for a good one or its timeout.
func (d *ddtResolver) refuse(r RefusedReason, src netip.AddrPort, attrs ...any) {
	d.counter.refused[r].Add(1)
	// Anyone can send unsolicited or malformed datagrams: not worth a
	// warning each.
	level := slog.LevelWarn
	if r == RefusedUnsolicited || r == RefusedMalformed || r == RefusedUnexpectedSource {
		level = slog.LevelDebug
	}
	d.log.Log(context.Background(), level, "Map-Referral refused", append(attrs, "reason", r.String(), "from", src)...)
}

// Tick retries the DDT Map-Requests whose Map-Referral is late, at the
// next RLOC of their set, and expires the referral cache.
func (d *ddtResolver) Tick() {
	now := d.now()
	var out []datagram
	d.mu.Lock()
	for {
		p, ok := d.due.Due(now)
		if !ok {
			break
		}
		d.counter.timeouts.Add(1)
		d.failed(p.last, now)
		if dg, ok := d.try(p, now); ok {
			out = append(out, dg)
		}
	}
	d.counter.expired.Add(uint64(d.cache.expire(now)))
	d.sweepDown(now)
	d.mu.Unlock()
	for _, dg := range out {
		if err := d.send.Send(dg.dst, dg.b); err != nil {
			d.log.Debug("send DDT Map-Request", "to", dg.dst, "error", err)
		}
	}
}

// negativeRecord is the record of a negative Map-Reply for eid:
// no locators, Natively-Forward, ttl minutes.
func negativeRecord(eid mapping.EID, ttl uint32) lisp.MapRecord {
	a, maskLen := eid.Wire()
	return lisp.MapRecord{TTL: ttl, EID: a, MaskLen: maskLen, Action: lisp.ActionNativelyForward}
}

// ttlLeft is the time to expires in whole minutes, rounded up: what a
// cached negative referral is still good for.
func ttlLeft(expires, now time.Time) uint32 { return minutes(max(expires.Sub(now), 0)) }

// describe names an entry in logs: its prefix, or "root".
func (r *referral) describe() string {
	if r.root {
		return "root"
	}
	return r.eid.String()
}
