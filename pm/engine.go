package pm

import (
	"iter"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mptcp"
)

// engine is the path manager's state: the connections, their plans and
// subflows, the mapping cache. It is driven by one goroutine (Daemon.Run)
// through its methods, each of which runs to completion: an event, a
// lookup's result, a tick, a link change. Nothing in it blocks but the
// kernel's netlink commands, which answer in microseconds.
type engine struct {
	cfg  *Config
	log  *slog.Logger
	k    Kernel
	diag Diag
	now  func() time.Time
	// rand returns a number in [0, n), to spread source ports.
	rand func(n int) int
	// localAddrs returns the host's usable addresses; ports the
	// ephemeral port range.
	localAddrs func() []netip.Addr
	ports      func() portRange
	// lookup starts a mapping lookup; its result comes back through
	// lookupDone on the engine's goroutine.
	lookup func(q Query)

	whitelist []destination
	announce  []netip.Addr
	kernelCap int // the kernel's subflow limit plus the first; 0: none

	conns    map[uint32]*conn
	lastPoll time.Time // of sock_diag, by tick
	cache    *mapCache // nil when caching is off
	// localCache holds this host's mappings by the peer they were asked
	// for (Query.From); nil when caching is off.
	localCache map[netip.Addr]*mapCache
	pending    map[Query][]uint32
	count      counters
}

// destination is a whitelist entry, parsed.
type destination struct {
	prefix netip.Prefix
	ports  []uint16
}

// connState is where a connection is in its life as the engine sees it.
type connState uint8

const (
	stateCreated connState = iota // CREATED seen, not yet established
	stateWaiting                  // established, waiting for min-bytes
	stateShort                    // established, not a long-lived flow
	stateLookup                   // waiting for the mapping system
	stateOpen                     // its plan applies
	stateServer                   // the listening side: nothing to open
)

var stateNames = [...]string{"created", "waiting", "short", "lookup", "open", "server"}

func (s connState) String() string { return stateNames[s] }

// conn is one MPTCP connection.
type conn struct {
	token         uint32
	local, remote netip.AddrPort // of the first subflow
	server        bool
	state         connState
	since         time.Time // established at
	// opened is when the connection was found worth its plan (at
	// ESTABLISHED, or at min-bytes); setup how long it then took until
	// every planned subflow was established, 0 until then.
	opened time.Time
	setup  time.Duration
	// announced are the peer's addresses by their remote ID.
	announced map[uint8]netip.AddrPort
	// localMap and remoteMap are the mappings the amptcp policy found.
	localMap, remoteMap *Mapping
	plan                *Plan
	slots               []*slot
	// extras are subflows that are in no slot: the peer's, those found
	// on start beyond the plan. They are left alone.
	extras []*attempt
	lastID uint8 // the last local ID given to a subflow
	// recent are the last local addresses its creates used: a new
	// subflow avoids them, as the old one may linger in TIME_WAIT.
	recent  [8]netip.AddrPort
	nRecent int
	bytes   uint64        // sent and received, from the last poll
	rtt     time.Duration // the largest smoothed RTT of its subflows
}

// slotState is where a planned subflow is.
type slotState uint8

const (
	slotPending slotState = iota // created, handshake not done
	slotUp                       // established
	slotBroken                   // no subflow: to be created (again)
)

var slotNames = [...]string{"pending", "up", "broken"}

func (s slotState) String() string { return slotNames[s] }

// slot is one planned subflow and the subflow that fills it now.
type slot struct {
	SlotSpec
	index   int
	state   slotState
	att     *attempt // nil when broken
	retryAt time.Time
	// reason is why the slot broke last; cause why it broke first, and
	// broke when. repairing is set from the break until a subflow is
	// established again.
	reason    string
	cause     string
	broke     time.Time
	repairing bool
	refusals  int // peer refusals in a row, for the backoff
	// synTimeouts counts the creates in a row that got no handshake in
	// time, for their doubling wait.
	synTimeouts int
	lastTry     time.Time // of the last create
	repairs     int
}

// attempt is one subflow the engine created or found.
type attempt struct {
	local, remote netip.AddrPort
	id            uint8
	sent          time.Time
	established   bool
	// handshaken: sock_diag shows the subflow established before its
	// SUB_ESTABLISHED event came; it is not sent again.
	handshaken bool
	// For stall detection: bytes acked at the last poll, when they last
	// grew, and whether the subflow was retransmitting.
	acked    uint64
	progress time.Time
	stuck    bool
	rtt      time.Duration
	// backup is the priority the backup policy gave it.
	backup bool
}

func newEngine(cfg *Config, log *slog.Logger) *engine {
	e := &engine{
		cfg:     cfg,
		log:     log,
		now:     time.Now,
		conns:   map[uint32]*conn{},
		pending: map[Query][]uint32{},
		count:   newCounters(),
	}
	for _, d := range cfg.LongLived.Whitelist {
		p, _ := d.prefix() // validated
		e.whitelist = append(e.whitelist, destination{p, d.Ports})
	}
	e.announce = cfg.announceAddrs()
	if a := cfg.AMPTCP; a != nil && *a.Cache {
		var iid uint32
		if a.InstanceID != nil {
			iid = *a.InstanceID
		}
		e.cache = newMapCache(a.MaxCacheTTL.Duration, iid)
		e.localCache = map[netip.Addr]*mapCache{}
	}
	return e
}

// maxLocalPeers bounds the peers this host's mappings are cached for:
// past it, the cache starts again.
const maxLocalPeers = 1024

// cacheFor is the cache of q's answers: this host's mappings are
// cached by peer, the peers' for every connection.
func (e *engine) cacheFor(q Query) *mapCache {
	if !q.Local || e.cache == nil {
		return e.cache
	}
	c := e.localCache[q.From]
	if c == nil {
		if len(e.localCache) >= maxLocalPeers {
			clear(e.localCache)
		}
		c = newMapCache(e.cache.maxTTL, e.cache.iid)
		e.localCache[q.From] = c
	}
	return c
}

// setLimits takes the kernel's subflow limit, which caps plans when
// kernel-limit is on: the limit counts the subflows beyond the first.
func (e *engine) setLimits(l mptcp.Limits) {
	if *e.cfg.KernelLimit {
		e.kernelCap = int(l.Subflows) + 1
	}
}

// event handles one mptcp_pm event.
func (e *engine) event(ev mptcp.Event) {
	e.count.events[ev.Type.String()]++
	switch ev.Type {
	case mptcp.EventCreated:
		e.connOf(ev)
	case mptcp.EventEstablished:
		e.established(ev)
	case mptcp.EventClosed:
		delete(e.conns, ev.Token)
	case mptcp.EventAnnounced:
		if c := e.conns[ev.Token]; c != nil && ev.Remote.IsValid() {
			c.announced[ev.RemoteID] = ev.Remote
			e.replan(c)
		}
	case mptcp.EventRemoved:
		if c := e.conns[ev.Token]; c != nil {
			delete(c.announced, ev.RemoteID)
			e.replan(c)
		}
	case mptcp.EventSubEstablished:
		e.subEstablished(ev)
	case mptcp.EventSubClosed:
		e.subClosed(ev)
	}
}

// connOf returns the connection of an event, new if need be, with the
// event's first-subflow addresses.
func (e *engine) connOf(ev mptcp.Event) *conn {
	c := e.conns[ev.Token]
	if c == nil {
		c = &conn{token: ev.Token, announced: map[uint8]netip.AddrPort{}}
		e.conns[ev.Token] = c
	}
	if c.state == stateCreated && ev.Local.IsValid() && ev.Remote.IsValid() {
		c.local, c.remote, c.server = ev.Local, ev.Remote, ev.Server
	}
	return c
}

func (e *engine) established(ev mptcp.Event) {
	c := e.connOf(ev)
	if c.state != stateCreated {
		return // a repeated event
	}
	if c.attempt(c.local, c.remote) == nil {
		c.extras = append(c.extras, &attempt{local: c.local, remote: c.remote})
	}
	first := c.attempt(c.local, c.remote)
	first.established, first.progress = true, e.now()
	e.start(c, true)
}

// start decides what an established connection gets: the server side
// announces, the client side opens its plan now, after min-bytes, or
// never.
func (e *engine) start(c *conn, announce bool) {
	c.since = e.now()
	switch {
	case c.server:
		c.state = stateServer
		if announce {
			e.announceTo(c)
		}
	case e.longLived(c):
		e.open(c)
	case e.cfg.LongLived.MinBytes > 0:
		c.state = stateWaiting
	default:
		c.state = stateShort
	}
}

// longLived says whether a connection gets its subflows at once: every
// one does without a filter, else those to a whitelisted destination.
func (e *engine) longLived(c *conn) bool {
	if len(e.whitelist) == 0 && e.cfg.LongLived.MinBytes == 0 {
		return true
	}
	for _, d := range e.whitelist {
		if d.prefix.Contains(c.remote.Addr()) && (len(d.ports) == 0 || slices.Contains(d.ports, c.remote.Port())) {
			return true
		}
	}
	return false
}

// announceTo announces the configured addresses of the connection's
// family, except its own, to the peer.
func (e *engine) announceTo(c *conn) {
	for i, a := range e.announce {
		if a.Is4() != c.local.Addr().Is4() || a == c.local.Addr() {
			continue
		}
		err := e.k.Announce(c.token, mptcp.Addr{ID: uint8(i + 1), IP: a, Flags: mptcp.FlagSignal})
		if err != nil {
			e.count.announceFailed++
			e.log.Warn("announce", "token", c.token, "address", a, "error", err)
			continue
		}
		e.count.announced++
	}
}

// open computes and applies the plan of a connection, or, for amptcp
// (both sites' mappings) and binder (its own site's) with mappings not
// in the cache, asks the mapping system first.
func (e *engine) open(c *conn) {
	c.opened = e.now()
	queries := []Query{{EID: c.remote.Addr(), From: c.local.Addr()}, {EID: c.local.Addr(), From: c.remote.Addr(), Local: true}}
	switch {
	case e.cfg.Policy == PolicyBinder && e.cfg.AMPTCP != nil:
		queries = queries[1:]
	case e.cfg.Policy != PolicyAMPTCP:
		e.apply(c, computePlan(e.input(c)))
		return
	}
	now := e.now()
	c.state = stateLookup
	for _, q := range queries {
		if m, ok := e.cacheFor(q).get(q.EID, now); ok {
			e.count.lookups["cached"]++
			c.setMapping(q.Local, m)
			continue
		}
		e.request(c, q)
	}
	e.ready(c)
}

func (c *conn) setMapping(local bool, m Mapping) {
	if local {
		c.localMap = &m
	} else {
		c.remoteMap = &m
	}
}

// request asks for a mapping for c, once for all the connections that
// need it at the same time.
func (e *engine) request(c *conn, q Query) {
	waiting, inFlight := e.pending[q]
	e.pending[q] = append(waiting, c.token)
	if !inFlight {
		e.lookup(q)
	}
}

// lookupDone takes the result of a lookup for the connections waiting
// for it. A failure gives them the default policy; the next connection
// asks again.
func (e *engine) lookupDone(q Query, m Mapping, took time.Duration, err error) {
	waiting := e.pending[q]
	delete(e.pending, q)
	e.count.latency.observe(took.Seconds())
	switch {
	case err != nil:
		e.count.lookups["failed"]++
		e.log.Warn("mapping lookup failed: the default policy applies", "eid", q.EID, "local", q.Local, "waiting", len(waiting), "error", err)
	case m.Negative:
		e.count.lookups["negative"]++
	default:
		e.count.lookups["answered"]++
	}
	if err == nil {
		e.cacheFor(q).put(m, e.now())
	}
	for _, token := range waiting {
		c := e.conns[token]
		if c == nil || c.state != stateLookup {
			continue
		}
		if err != nil {
			e.count.fallbacks++
			e.apply(c, fallback(e.input(c), "mapping system: "+err.Error()))
			continue
		}
		c.setMapping(q.Local, m)
		e.ready(c)
	}
}

// ready applies the plan once the mappings it needs are known: both
// for amptcp, the local one for binder.
func (e *engine) ready(c *conn) {
	if c.state == stateLookup && c.localMap != nil && (c.remoteMap != nil || e.cfg.Policy == PolicyBinder) {
		e.apply(c, computePlan(e.input(c)))
	}
}

// input gathers what the plan of c is computed from.
func (e *engine) input(c *conn) planInput {
	in := planInput{
		policy:      e.cfg.Policy,
		subflows:    e.cfg.Subflows,
		maxSubflows: e.cfg.MaxSubflows,
		kernelCap:   e.kernelCap,
		local:       c.local,
		remote:      c.remote,
		localMap:    c.localMap,
		remoteMap:   c.remoteMap,
	}
	if a := e.cfg.AMPTCP; a != nil {
		in.equation = a.Equation
	}
	if e.localAddrs != nil {
		in.localAddrs = e.localAddrs()
	}
	ids := make([]uint8, 0, len(c.announced))
	for id := range c.announced {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := c.announced[id]
		if a.Port() == 0 {
			a = netip.AddrPortFrom(a.Addr(), c.remote.Port())
		}
		in.remoteAddrs = append(in.remoteAddrs, a)
	}
	return in
}

// apply makes p the plan of c: the subflows that exist fill its slots,
// and the others are created.
func (e *engine) apply(c *conn, p Plan) {
	c.plan, c.state = &p, stateOpen
	e.count.plans[string(p.Policy)]++
	e.count.planSizes[p.N]++
	e.log.Info("plan", "token", c.token, "local", c.local, "remote", c.remote, "policy", p.Policy,
		"subflows", p.N, "why", p.Why, "fallback", p.Fallback)
	c.slots = make([]*slot, len(p.Slots))
	for i, spec := range p.Slots {
		c.slots[i] = &slot{SlotSpec: spec, index: i, state: slotBroken}
	}
	e.fill(c)
	for _, s := range c.slots {
		if s.att == nil {
			e.create(c, s)
		}
	}
	e.setUp(c, e.now())
}

// replan applies a new plan to an open connection whose peer announced
// or removed an address: slots that stay keep their subflows, the new
// ones are created and those that go are destroyed.
func (e *engine) replan(c *conn) {
	if c.state != stateOpen || (c.plan.Policy != PolicyFullmesh && c.plan.Policy != PolicyAMPTCP) {
		return // the other plans do not depend on the peer's addresses
	}
	p := computePlan(e.input(c))
	e.log.Info("new plan", "token", c.token, "subflows", p.N, "why", p.Why)
	old := c.slots
	c.plan = &p
	c.slots = make([]*slot, len(p.Slots))
	for i, spec := range p.Slots {
		j := slices.IndexFunc(old, func(s *slot) bool { return s != nil && s.SlotSpec == spec })
		if j >= 0 {
			c.slots[i], old[j] = old[j], nil
			c.slots[i].index = i
			continue
		}
		c.slots[i] = &slot{SlotSpec: spec, index: i, state: slotBroken}
	}
	for _, s := range old {
		if s != nil && s.att != nil {
			e.destroy(c, s, "replan")
		}
	}
	e.fill(c)
	for _, s := range c.slots {
		if s.att == nil && s.state == slotBroken && !s.repairing {
			e.create(c, s)
		}
	}
}

// fill puts the connection's unattached subflows into the slots they
// match: first those with the slot's addresses and port-sum residue, then
// those with its addresses only, so that what exists (on start, after a
// resync) counts toward the plan and is never doubled.
func (e *engine) fill(c *conn) {
	for _, exact := range []bool{true, false} {
		kept := c.extras[:0]
		for _, a := range c.extras {
			s := c.freeSlot(a, exact)
			if s == nil {
				kept = append(kept, a)
				continue
			}
			s.att, s.state = a, slotPending
			if a.established {
				s.state = slotUp
			}
		}
		c.extras = kept
	}
}

func (c *conn) freeSlot(a *attempt, exact bool) *slot {
	for _, s := range c.slots {
		if s.att != nil || s.Local != a.local.Addr() || s.Remote != a.remote {
			continue
		}
		if !exact || int(portSum(a.local.Port(), a.remote.Port())%uint32(c.plan.P)) == s.Residue {
			return s
		}
	}
	return nil
}

// attempts yields the subflows of c, in slots or not.
func (c *conn) attempts() iter.Seq[*attempt] {
	return func(yield func(*attempt) bool) {
		for _, s := range c.slots {
			if s.att != nil && !yield(s.att) {
				return
			}
		}
		for _, a := range c.extras {
			if !yield(a) {
				return
			}
		}
	}
}

// attempt returns the subflow of c with these addresses, in a slot or
// not.
func (c *conn) attempt(local, remote netip.AddrPort) *attempt {
	for a := range c.attempts() {
		if a.local == local && a.remote == remote {
			return a
		}
	}
	return nil
}

// slotOf returns the slot whose subflow has these addresses.
func (c *conn) slotOf(local, remote netip.AddrPort) *slot {
	for _, s := range c.slots {
		if s.att != nil && s.att.local == local && s.att.remote == remote {
			return s
		}
	}
	return nil
}

func (e *engine) subEstablished(ev mptcp.Event) {
	c := e.conns[ev.Token]
	if c == nil {
		return
	}
	now := e.now()
	if s := c.slotOf(ev.Local, ev.Remote); s != nil {
		s.att.established, s.att.progress, s.state = true, now, slotUp
		s.synTimeouts = 0
		e.setUp(c, now)
		if s.repairing {
			s.repairing = false
			s.repairs++
			e.count.repaired[s.cause]++
			e.log.Info("subflow repaired", "token", c.token, "slot", s.index, "local", ev.Local, "remote", ev.Remote,
				"broken", s.cause, "after", now.Sub(s.broke))
		}
		return
	}
	if a := c.attempt(ev.Local, ev.Remote); a != nil {
		a.established = true
		return
	}
	if slices.Contains(c.recent[:], ev.Local) {
		return // one the engine destroyed, whose handshake ended meanwhile: its SUB_CLOSED follows
	}
	c.extras = append(c.extras, &attempt{local: ev.Local, remote: ev.Remote, id: ev.LocalID, established: true, progress: now})
}

// setUp records, the first time every planned subflow of c is
// established, how long that took since c was opened.
func (e *engine) setUp(c *conn, now time.Time) {
	if c.setup != 0 || c.opened.IsZero() {
		return
	}
	for _, s := range c.slots {
		if s.state != slotUp {
			return
		}
	}
	c.setup = max(now.Sub(c.opened), time.Nanosecond)
	e.count.setup.observe(c.setup.Seconds())
}

// Reset reasons of MP_TCPRST (RFC 8684 §3.6) that mean the peer will not
// have the subflow: no resources, or prohibited by policy.
const (
	resetResource  = 2
	resetProhibits = 3
)

func (e *engine) subClosed(ev mptcp.Event) {
	c := e.conns[ev.Token]
	if c == nil {
		return
	}
	s := c.slotOf(ev.Local, ev.Remote)
	if s == nil {
		c.extras = slices.DeleteFunc(c.extras, func(a *attempt) bool { return a.local == ev.Local && a.remote == ev.Remote })
		return
	}
	// A socket error is a path in trouble: retry at the repair interval.
	// No error is a graceful close, and these reset reasons and a refused
	// connection a refusal: the peer does not want the subflow (or has
	// no listener for it), so back off.
	reason, refused := "error", false
	switch {
	case ev.ResetReason == resetResource || ev.ResetReason == resetProhibits || ev.Error == uint8(unix.ECONNREFUSED):
		reason, refused = "refused", true
	case ev.Error != 0:
		reason = "error"
	default:
		reason, refused = "closed", true
	}
	e.log.Info("subflow closed", "token", c.token, "slot", s.index, "local", ev.Local, "remote", ev.Remote,
		"errno", ev.Error, "reset_reason", ev.ResetReason, "established", s.att.established)
	s.att = nil
	e.broken(c, s, reason, refused)
	e.backups(c) // a backup may have to take over
}
