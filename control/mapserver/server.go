// Package mapserver is the map-server role of lispd (RFC 9301 §8.2 and
// §8.3): it authenticates Map-Registers from the ETRs of configured sites,
// keeps their registrations until they expire, acknowledges them with
// Map-Notify when asked, and answers for the EIDs it holds (a proxy reply,
// or the ETR to forward the Map-Request to).
package mapserver

import (
	"bytes"
	"context"
	"fmt"
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

// Server is the map-server. Its methods are safe for concurrent use: many
// Resolve calls run in parallel, registrations take turns.
type Server struct {
	log      *slog.Logger
	now      func() time.Time
	timeout  time.Duration
	proxyTTL uint32 // minutes

	sites        []*Site
	sitePrefixes *mapping.Table[*SitePrefix] // read-only after New

	mu        sync.RWMutex
	regs      *mapping.Index[regSlot]
	expiry    deadlines.Queue[*ETR]
	replay    replayGuard
	notifying map[uint64]*pendingNotify // unsolicited Map-Notifies awaiting their ack, by nonce
	notifies  deadlines.Queue[*pendingNotify]
	counter   counters
	refusals  refusalLog
	scratch   []byte // to encode records in (Registration.encode)
}

// New returns a map-server for a validated configuration. A nil logger
// discards.
func New(cfg *config.MapServer, log *slog.Logger) (*Server, error) {
	sites, table, err := newSites(cfg.Sites)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		log:          log.With("component", "map-server"),
		now:          time.Now,
		timeout:      cfg.RegistrationTimeout.Duration,
		proxyTTL:     uint32(cfg.ProxyReplyTTL.Minutes()),
		sites:        sites,
		sitePrefixes: table,
		regs:         mapping.NewIndex[regSlot](),
		replay:       newReplayGuard(cfg.ReplayWindow.Duration, time.Now()),
		notifying:    map[uint64]*pendingNotify{},
	}, nil
}

// SetClock replaces time.Now, for tests of expiry and anti-replay; the
// map-server counts as started at its now.
func (s *Server) SetClock(now func() time.Time) {
	s.now = now
	s.replay = newReplayGuard(s.replay.window, now())
}

// Resolve says what the map-server knows of eid in instance iid: a
// mapping to proxy, an ETR to forward to, or where there is nothing.
func (s *Server) Resolve(iid uint32, eid netip.Addr) mapping.Answer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if v, ok := s.regs.LookupValue(iid, eid); ok {
		reg := v.reg
		if reg.Proxy {
			wire := reg.wire
			if v.n > 0 {
				wire = bytes.Clone(v.wire[:v.n])
			}
			return mapping.Answer{Kind: mapping.Mapping, EID: reg.EID, Record: reg.record(s.proxyTTL), Wire: wire}
		}
		return mapping.Answer{Kind: mapping.Forward, EID: reg.EID, ETR: reg.forwardTo(), Record: reg.record(s.proxyTTL)}
	}
	if site, _, ok := s.sitePrefixes.Covering(mapping.HostEID(iid, eid)); ok {
		return mapping.Answer{Kind: mapping.Unregistered, EID: s.regs.Gap(site, eid)}
	}
	return mapping.Answer{Kind: mapping.NotFound, EID: s.sitePrefixes.Gap(wholeSpace(iid, eid), eid)}
}

// Len is the number of registered EID-prefixes.
func (s *Server) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.regs.Len()
}

// AppendMapping appends the record of eid's proxy Map-Reply to b and
// returns true, when the map-server replies for eid's ETRs
// (mapping.WireDatabase): the map-resolver's path for most Map-Requests,
// which reads the index's slot and not the registration.
func (s *Server) AppendMapping(b []byte, iid uint32, eid netip.Addr) ([]byte, bool) {
	s.mu.RLock()
	v, ok := s.regs.LookupValue(iid, eid)
	switch {
	case !ok || !v.proxy:
		ok = false
	case v.n > 0:
		b = append(b, v.wire[:v.n]...)
	case v.reg.wire != nil:
		b = append(b, v.reg.wire...)
	default:
		ok = false
	}
	s.mu.RUnlock()
	return b, ok
}

// Prefetch reads ahead, under one read lock, what AppendMapping reads
// for each query (mapping.Index.Prefetch): lispd's loops call it on a
// batch of Map-Requests before answering them one by one. What it
// returns depends on what it read; keeping it keeps the reads.
func (s *Server) Prefetch(qs []mapping.Query) uint32 {
	s.mu.RLock()
	sum := s.regs.Prefetch(qs)
	s.mu.RUnlock()
	return sum
}

// PrefetchRegisters reads ahead, under one read lock, what registering
// the EID-prefixes will read of the index (mapping.Index.PrefetchUpserts),
// as Prefetch does for Map-Requests.
func (s *Server) PrefetchRegisters(es []mapping.EID) uint32 {
	s.mu.RLock()
	sum := s.regs.PrefetchUpserts(es)
	s.mu.RUnlock()
	return sum
}

// wholeSpace is the prefix of every address of a's family in iid.
func wholeSpace(iid uint32, a netip.Addr) mapping.EID {
	return mapping.NewEID(iid, netip.PrefixFrom(a, 0))
}

// HandleRegister processes a Map-Register that arrived from src and queues
// its Map-Notify, if it asked for one, in out. A refused Map-Register
// changes nothing; it is counted by reason and logged.
func (s *Server) HandleRegister(raw []byte, src netip.AddrPort, out *control.Outbox) {
	m := decoded.Get().(*lisp.MapRegister)
	defer decoded.Put(m)
	if err := m.DecodeFromBytes(raw); err != nil {
		s.refuse(Malformed, src, nil, "error", err)
		return
	}
	var room [4]mapping.EID // the usual Map-Register has one record
	site, eids, reason := s.authorize(m, room[:0])
	if reason != Accepted {
		s.refuse(reason, src, m)
		return
	}
	var auth *lisp.Authenticator
	if m.Auth.Algorithm != lisp.AuthNone {
		key, ok := site.key(m.Auth.KeyID, m.Auth.Algorithm)
		if !ok {
			s.refuse(UnknownKey, src, m, "site", site.Name)
			return
		}
		auth = key.auths.Get().(*lisp.Authenticator)
		defer key.auths.Put(auth)
		if auth.Verify(raw) != nil {
			s.refuse(AuthFailed, src, m, "site", site.Name)
			return
		}
	} else if !site.AllowUnauthenticated || len(m.Auth.Data) != 0 {
		s.refuse(Unauthenticated, src, m, "site", site.Name)
		return
	}
	now := s.now()
	if site.AntiReplay {
		if r := s.replay.timely(m.Nonce, now); r != Accepted {
			s.refuse(r, src, m, "site", site.Name, "nonce", fmt.Sprintf("%#016x", m.Nonce))
			return
		}
	}
	if !s.apply(site, m, eids, src, now, out) {
		s.refuse(Replayed, src, m, "site", site.Name, "nonce", fmt.Sprintf("%#016x", m.Nonce))
		return
	}
	s.counter.add(Accepted)
	if m.WantMapNotify {
		s.notify(raw, src, auth, out)
	}
}

// decoded holds Map-Registers to decode into: decoding into one reuses
// the storage of its records, so a registration copies the locators it
// keeps (see ETR.update).
var decoded = sync.Pool{New: func() any { return new(lisp.MapRegister) }}

// authorize maps the records to EIDs, appended to eids, and finds the one
// site they all belong to. A Map-Register is taken whole or not at all.
func (s *Server) authorize(m *lisp.MapRegister, eids []mapping.EID) (*Site, []mapping.EID, Reason) {
	if len(m.Records) == 0 {
		return nil, nil, NoRecords
	}
	var site *Site
	for i := range m.Records {
		rec := &m.Records[i]
		e, err := mapping.FromWire(rec.EID, rec.MaskLen)
		if err != nil {
			return nil, nil, UnsupportedEID
		}
		sp, ok := admits(s.sitePrefixes, e)
		switch {
		case !ok && i == 0:
			return nil, nil, UnknownSite
		case !ok || (site != nil && sp.site != site):
			return nil, nil, OutsideSite
		}
		site, eids = sp.site, append(eids, e)
	}
	return site, eids, Accepted
}

// apply stores the records of an authenticated Map-Register, unless its
// nonce is not newer than the last of its xTR (anti-replay), and tells the
// other ETRs of merged registrations whose locators changed.
func (s *Server) apply(site *Site, m *lisp.MapRegister, eids []mapping.EID, src netip.AddrPort, now time.Time, out *control.Outbox) bool {
	id := identityOf(src, m.XTRID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if site.AntiReplay && !s.replay.advance(keyOf(site, m.XTRID), m.Nonce) {
		return false
	}
	for i, rec := range m.Records {
		if rec.TTL == 0 { // de-registration
			if v, ok := s.regs.Get(eids[i]); ok {
				reg := v.reg
				before := reg.locators
				s.drop(reg, reg.keep(func(e *ETR) bool { return e.identity() != id }))
				if len(reg.ETRs) > 0 && !sameLocators(before, reg.locators) {
					s.notifyMerged(reg, nil, now, out)
				}
			}
			continue
		}
		v, created := s.regs.Upsert(eids[i])
		if created {
			v.reg = newRegistration(eids[i], site)
		}
		reg := v.reg
		before := reg.locators
		etr := reg.find(id)
		refreshed := etr != nil
		if !refreshed {
			etr = reg.newETR(now)
		}
		prev := etr.record()
		*etr = ETR{
			Source: src, XTRID: m.XTRID, Locators: reg.ownLocators(etr.Locators, rec.Locators),
			TTL: rec.TTL, MapVersion: rec.MapVersion, Action: rec.Action,
			ProxyReply: m.ProxyReply, Merge: m.MergeRequest, KeyID: m.Auth.KeyID,
			first: etr.first, last: instantOf(now), expires: instantOf(now.Add(s.lifetime(m, rec))),
			Registers: etr.Registers + 1, WantedNotify: m.WantMapNotify,
			reg: reg, Slot: etr.Slot, alg: m.Auth.Algorithm, notify: etr.notify, push: etr.push,
		}
		if refreshed && len(reg.ETRs) == 1 && etr.record() == prev {
			// The one ETR refreshes its record as it was, the usual
			// Map-Register: merging would give what it gave last time.
			s.expiry.Schedule(etr)
			continue
		}
		// Without the merge bit the ETR's set is the whole set (RFC 9301:
		// each ETR registers all of the site's locators); with it, it
		// replaces only its own part among the ETRs that merge.
		s.drop(reg, reg.keep(func(e *ETR) bool { return e == etr || (etr.Merge && e.Merge) }))
		v.update(reg, reg.merge(s.proxyTTL, &s.scratch))
		s.expiry.Schedule(etr)
		if !sameLocators(before, reg.locators) {
			s.notifyMerged(reg, etr, now, out)
		}
		if created && s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("registered", "eid", eids[i], "site", site.Name, "from", src, "rlocs", len(rec.Locators))
		}
	}
	return true
}

// drop forgets ETR registrations of reg, and reg itself if none is left.
func (s *Server) drop(reg *Registration, gone []*ETR) {
	for _, e := range gone {
		s.expiry.Remove(e)
		s.stopNotify(e)
		s.stopPushes(e)
	}
	if len(reg.ETRs) == 0 {
		s.regs.Delete(reg.EID)
		return
	}
	if len(gone) > 0 {
		wire := reg.merge(s.proxyTTL, &s.scratch)
		if v, ok := s.regs.Get(reg.EID); ok {
			v.update(reg, wire)
		}
	}
}

// lifetime is how long a registration lasts: the record TTL (minutes)
// when the T bit asks for it, else the configured timeout.
func (s *Server) lifetime(m *lisp.MapRegister, rec lisp.MapRecord) time.Duration {
	if m.UseTTL && rec.TTL != lisp.TTLForever {
		return time.Duration(rec.TTL) * time.Minute
	}
	return s.timeout
}

// notify acknowledges the Map-Register raw with a Map-Notify to where it
// came from (as OOR and lispers.net do), with its nonce, records and
// xTR-ID, authenticated with the same key (auth; nil for an
// unauthenticated site) and its full digest.
func (s *Server) notify(raw []byte, src netip.AddrPort, auth *lisp.Authenticator, out *control.Outbox) {
	authLen := 0
	if auth != nil {
		authLen = auth.DataLen()
	}
	start := len(out.Begin())
	b, err := lisp.AppendNotifyFor(out.Begin(), raw, authLen)
	if err == nil && auth != nil {
		err = auth.Sign(b[start:])
	}
	if err != nil {
		s.log.Warn("cannot build Map-Notify", "to", src, "error", err)
		return
	}
	out.Commit(src, b)
	s.counter.notifies.Add(1)
}

// refuse counts a refused Map-Register and logs it, once in a while per
// reason: a flood of forgeries or replays costs a counter each, not a
// log line.
func (s *Server) refuse(r Reason, src netip.AddrPort, m *lisp.MapRegister, attrs ...any) {
	s.counter.add(r)
	if !s.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	log, held := s.refusals.allow(r, s.now())
	if !log {
		return
	}
	if held > 0 {
		attrs = append(attrs, "not_logged_since", held)
	}
	attrs = append(attrs, "reason", r.String(), "from", src)
	if m != nil && len(m.Records) > 0 {
		attrs = append(attrs, "eid", m.Records[0].EID, "mask_len", m.Records[0].MaskLen)
	}
	s.log.Warn("Map-Register refused", attrs...)
}

// Expire drops the registrations whose time has come and returns how many
// ETR registrations it dropped.
func (s *Server) Expire() int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	dropped := 0
	s.replay.forget(now)
	for {
		etr, ok := s.expiry.Due(now)
		if !ok {
			break
		}
		reg := etr.reg
		before := reg.locators
		s.drop(reg, reg.keep(func(e *ETR) bool { return e != etr }))
		if len(reg.ETRs) > 0 && !sameLocators(before, reg.locators) {
			s.notifyMerged(reg, nil, now, nil)
		}
		dropped++
		s.counter.expired.Add(1)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("registration expired", "eid", reg.EID, "site", reg.Site.Name, "from", etr.Source,
				"registered_for", now.Sub(etr.first.time()).Round(time.Second))
		}
	}
	return dropped
}
