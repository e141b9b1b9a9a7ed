// Package mapcache is the map-cache of lispd's tunnel routers, ITRs and
// RTRs (RFC 9301 §8.1, RFC 9300 §12): it resolves the EIDs that the data
// plane has packets for and no entry, by Encapsulated Map-Requests to the
// map-resolvers; installs the mappings of the Map-Replies in the data plane
// as paths (a plain RLOC is a path of one hop, an Explicit Locator Path
// one of several); expires them when their TTL runs out; refreshes them
// when a Solicit-Map-Request says they changed; and re-installs them when
// RLOC probing finds one of their locators down or up again.
//
// The data plane is a Forwarder: the eBPF maps in lispd, a fake in tests.
// Everything is sent through a control.Sender, from port 4342.
package mapcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/mapping"
)

// Forwarder is where map-cache entries go: the data plane.
type Forwarder interface {
	Put(dataplane.Key, dataplane.Entry) error
	Delete(dataplane.Key) error
}

// Options are what the map-cache takes from outside its configuration.
type Options struct {
	Forwarder Forwarder
	Sender    control.Sender
	// LocalRLOCs are the router's RLOCs: the ITR-RLOCs of its
	// Map-Requests, where the replies come back.
	LocalRLOCs func() []netip.Addr
	// Reachable says whether RLOC probing considers a locator up; nil
	// means every locator is. A path is up when its locator's R bit is set
	// and every hop of it is reachable: a packet sent along an ELP needs
	// every RTR on the way, so one hop down takes the whole path down.
	Reachable func(netip.Addr) bool
	// RTT gives a locator's smoothed round-trip time, for the status.
	RTT func(netip.Addr) (time.Duration, bool)
	// Port is where Map-Replies come back, the inner UDP source port of
	// the Map-Requests: the port lispd listens on; 0 means 4342.
	Port uint16
	// Release sends held packets on, in order, through the data plane
	// (dataplane.Dataplane.Release); nil when the data plane holds
	// nothing (miss is not hold).
	Release func([]dataplane.Held) error
	// SiteEIDs are an xTR's own EID-prefixes, whose first of a request's
	// family is its source EID; nil for an RTR.
	SiteEIDs func() []dataplane.Key
	// Pinner, with mptcp-subflows bind-stateful, pins subflows to the
	// paths their destinations' ETRs choose (flows.go); nil: Subflow
	// asks nothing.
	Pinner Pinner
	Log    *slog.Logger
}

// Cache is the map-cache. Its methods are safe for concurrent use.
type Cache struct {
	log        *slog.Logger
	now        func() time.Time
	fwd        Forwarder
	send       control.Sender
	localRLOCs func() []netip.Addr
	reachable  func(netip.Addr) bool
	rtt        func(netip.Addr) (time.Duration, bool)
	port       uint16
	siteEIDs   func() []dataplane.Key
	pin        Pinner

	bits       bool // elp-bits as-sent: the P and S bits of ELP hops count
	resolvers  []netip.AddrPort
	timeout    time.Duration
	tries      int // per request: the first and the retries
	maxEntries int

	mu        sync.Mutex
	entries   *mapping.Table[*entry]
	expiry    deadlines.Queue[*entry]
	pending   map[mapping.EID]*request
	nonces    map[uint64]*request
	smrDue    map[mapping.EID]bool // entries an SMR asked to refresh within smrInterval
	downSince []time.Time          // per map-resolver: when it last let a try time out
	refreshes []mapping.EID        // adopted entries to ask for again
	layered   map[*entry]bool      // entries with Lookup hops (layered.go)
	wanted    map[mapping.EID]bool // EIDs to ask for: of Lookup hops, of bindings
	refetch   map[mapping.EID]bool // of them, those asked for again, entry or not
	flows     map[dataplane.Flow]*request
	pins      map[dataplane.Flow]*pendingPin
	counter   counters

	release               func([]dataplane.Held) error
	held                  map[mapping.EID]heldOf // by destination (hold.go)
	heldTotal             int
	heldSeq               uint64 // counts the EIDs held for, for heldOf.first
	holdPerEID, holdTotal int
}

// New returns the map-cache of a validated configuration.
func New(cfg *config.MapCache, opts Options) (*Cache, error) {
	if opts.Forwarder == nil || opts.Sender == nil || opts.LocalRLOCs == nil {
		return nil, errors.New("map-cache: a forwarder, a sender and local RLOCs are required")
	}
	c := &Cache{
		log:        opts.Log,
		now:        time.Now,
		fwd:        opts.Forwarder,
		send:       opts.Sender,
		localRLOCs: opts.LocalRLOCs,
		reachable:  opts.Reachable,
		rtt:        opts.RTT,
		port:       opts.Port,
		maxEntries: cfg.MaxEntries,
		entries:    mapping.NewTable[*entry](),
		pending:    map[mapping.EID]*request{},
		nonces:     map[uint64]*request{},
		smrDue:     map[mapping.EID]bool{},
		release:    opts.Release,
		held:       map[mapping.EID]heldOf{},
		holdPerEID: cfg.HoldPerEID,
		holdTotal:  cfg.HoldTotal,
		layered:    map[*entry]bool{},
		wanted:     map[mapping.EID]bool{},
		refetch:    map[mapping.EID]bool{},
		flows:      map[dataplane.Flow]*request{},
		pins:       map[dataplane.Flow]*pendingPin{},
		siteEIDs:   opts.SiteEIDs,
		pin:        opts.Pinner,
		bits:       cfg.ELPBits == "as-sent",
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("component", "map-cache")
	if c.port == 0 {
		c.port = control.Port
	}
	if c.reachable == nil {
		c.reachable = func(netip.Addr) bool { return true }
	}
	if err := c.SetResolvers(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// SetResolvers takes the map-resolvers and the request timeout and
// retries of cfg, as a configuration reload does; requests in flight
// finish with what they started with.
func (c *Cache) SetResolvers(cfg *config.MapCache) error {
	var resolvers []netip.AddrPort
	for _, s := range cfg.MapResolvers {
		ap, err := config.ListenAddr(s)
		if err != nil {
			return fmt.Errorf("map-cache: map-resolver: %w", err)
		}
		resolvers = append(resolvers, ap)
	}
	if len(resolvers) == 0 {
		return errors.New("map-cache: no map-resolver")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resolvers = resolvers
	c.downSince = make([]time.Time, len(resolvers))
	c.timeout, c.tries = cfg.RequestTimeout.Duration, 1+cfg.RequestRetries
	return nil
}

// SetClock replaces time.Now, for tests of timeouts and expiry.
func (c *Cache) SetClock(now func() time.Time) { c.now = now }

// Run resolves the misses the data plane reports, holds the packets it
// hands over (hold.go), retries the requests that time out and expires
// entries, until ctx is done.
func (c *Cache) Run(ctx context.Context, misses <-chan dataplane.Miss, held <-chan dataplane.Held) {
	c.mu.Lock()
	every := tickEvery(c.timeout)
	c.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-misses:
			if !ok {
				misses = nil // the data plane closed: keep serving replies and timers
				continue
			}
			c.Miss(m)
		case h, ok := <-held:
			if !ok {
				held = nil
				continue
			}
			c.Hold(h)
		case <-t.C:
			c.Tick()
		}
	}
}

// tickEvery is how often timers are checked: a quarter of the request
// timeout, so a retry leaves at most 25% late, and at most every 100ms
// (TTLs are minutes).
func tickEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/4, time.Millisecond), 100*time.Millisecond)
}

// Tick retries the Map-Requests whose reply is late, gives up on those
// that had all their tries, sends the refreshes SMRs asked for that were
// held back, and expires entries whose TTL ran out.
func (c *Cache) Tick() {
	now := c.now()
	var out []datagram
	c.mu.Lock()
	for _, r := range c.pending {
		out = c.retry(r, now, out)
	}
	for _, r := range c.flows {
		out = c.retry(r, now, out)
	}
	c.expirePins(now)
	out = append(out, c.refreshDue(now)...)
	out = append(out, c.refreshAdopted(now)...)
	c.expire(now)
	out = append(out, c.askWanted()...)
	c.mu.Unlock()
	c.transmit(out)
}

// retry sends r again if its reply is late, or gives up after its last
// try: a subflow whose path was asked then stays where it is. The caller
// holds the lock.
func (c *Cache) retry(r *request, now time.Time, out []datagram) []datagram {
	if now.Before(r.deadline) {
		return out
	}
	c.resolverFailed(r.tries[len(r.tries)-1].resolver, now)
	if len(r.tries) >= c.tries {
		c.finish(r)
		c.counter.failed.Add(1)
		c.log.Debug("no Map-Reply", "eid", r.eid, "flow", r.flow, "tries", len(r.tries))
		if r.flow != nil {
			c.pinTo(r.dpFlow, dataplane.NoPin)
		} else {
			c.dropHeld(r.eid)
		}
		return out
	}
	if dg, ok := c.try(r, now); ok {
		out = append(out, dg)
		c.counter.retried.Add(1)
	}
	return out
}

// datagram is a message to send once the lock is released.
type datagram struct {
	dst netip.AddrPort
	b   []byte
}

func (c *Cache) transmit(out []datagram) {
	for _, dg := range out {
		if err := c.send.Send(dg.dst, dg.b); err != nil {
			c.counter.sendErrors.Add(1)
			c.log.Debug("send", "to", dg.dst, "error", err)
		}
	}
}

// keyOf and eidOf convert between the data plane's keys and the mapping
// package's EIDs, which are the same pair.
func keyOf(e mapping.EID) dataplane.Key { return dataplane.Key{InstanceID: e.IID, Prefix: e.Prefix} }
func eidOf(k dataplane.Key) mapping.EID { return mapping.NewEID(k.InstanceID, k.Prefix) }
