// Package xtr is the control plane of lispd's xtr role, a site's ITR and
// ETR (RFC 9301 §8.2 and §8.3): it registers the site's EID-prefixes and
// their locators, RLOCs and Explicit Locator Paths, with its map-servers
// and checks their Map-Notifies; answers the Map-Requests for those
// EID-prefixes that map-servers forward to it (when it did not ask them to
// reply for it) and RLOC probes; and, when a mapping changes, solicits
// Map-Requests (SMR) from the ITRs that asked for it lately.
//
// The rtr role uses it with no mappings: an RTR answers RLOC probes, since
// ITRs probe the hops of ELPs, and nothing else.
//
// The map-cache of the ITR half is package mapcache; probing is package
// probe. Everything is sent from port 4342, through a control.Sender from
// timers and through an Outbox from the daemon's serving loops.
package xtr

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Options are what the xtr takes from outside its configuration.
type Options struct {
	// InstanceID of the site's EIDs (dataplane.instance-id).
	InstanceID uint32
	Sender     control.Sender
	// LocalRLOCs are the router's RLOCs: the ITR-RLOCs of its SMRs.
	LocalRLOCs func() []netip.Addr
	// Stateful: the ETR binds the subflows of the stateful Map-Requests
	// for the site's hosts (mptcp-subflows bind-stateful, binder.go).
	Stateful bool
	// Subflow looks a subflow up in the ETR's subflow table, where the
	// binder learns the subflows' connections and ends; nil: bindings
	// take the hosts for the connection and end with their TTL.
	Subflow func(dataplane.Flow) (dataplane.Subflow, bool, error)
	Log     *slog.Logger
}

// XTR is the xtr role's control plane. Its methods are safe for
// concurrent use.
type XTR struct {
	log        *slog.Logger
	now        func() time.Time
	send       control.Sender
	localRLOCs func() []netip.Addr
	iid        uint32
	interval   time.Duration
	xtrID      *lisp.XTRID
	merge      bool // register with the a bit: this xTR's part of the site's locators
	stateful   bool
	subflow    func(dataplane.Flow) (dataplane.Subflow, bool, error)

	mu       sync.Mutex
	mappings []*dbMapping // in configuration order, as registered
	db       *mapping.Table[*dbMapping]
	servers  []*server
	stamps   control.TimeNonces // the nonces of Map-Registers: they only increase
	nonces   map[uint64]*server // of the Map-Registers awaiting a Map-Notify
	itrs     map[itrKey]*itr    // ITRs answered lately, for SMRs
	sets     map[mapping.EID][]teSet
	bindings map[control.Flow]*binding
	waiting  []*waitingAnswer
	swept    time.Time // when the bindings were last swept
	counter  counters
}

// dbMapping is a database mapping: an EID-prefix of the site and how it
// is reached.
type dbMapping struct {
	eid       mapping.EID
	cfg       config.DatabaseMapping
	reachable []bool // per locator: the R bit
	record    lisp.MapRecord
}

// New returns the xtr of a validated configuration; a nil cfg is an RTR,
// which only answers RLOC probes.
func New(cfg *config.XTR, opts Options) (*XTR, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	x := &XTR{
		log:        log.With("component", "xtr"),
		now:        time.Now,
		send:       opts.Sender,
		localRLOCs: opts.LocalRLOCs,
		iid:        opts.InstanceID,
		db:         mapping.NewTable[*dbMapping](),
		nonces:     map[uint64]*server{},
		itrs:       map[itrKey]*itr{},
		sets:       map[mapping.EID][]teSet{},
		bindings:   map[control.Flow]*binding{},
		stateful:   opts.Stateful,
		subflow:    opts.Subflow,
	}
	if x.localRLOCs == nil {
		x.localRLOCs = func() []netip.Addr { return nil }
	}
	if cfg == nil {
		return x, nil
	}
	if opts.Sender == nil {
		return nil, fmt.Errorf("xtr: a sender is required")
	}
	x.interval = cfg.RegisterInterval.Duration
	x.merge = cfg.Merge
	id, err := cfg.ID()
	if err != nil {
		return nil, fmt.Errorf("xtr: xtr-id: %w", err)
	}
	if id != nil {
		x.xtrID = &lisp.XTRID{ID: *id, SiteID: cfg.SiteID}
	}
	if x.mappings, err = x.build(cfg.DatabaseMappings); err != nil {
		return nil, err
	}
	for _, m := range x.mappings {
		x.db.Insert(m.eid, m)
	}
	for _, ref := range cfg.MapServers {
		s, err := newServer(ref)
		if err != nil {
			return nil, err
		}
		x.servers = append(x.servers, s)
	}
	return x, nil
}

// SetClock replaces time.Now, for tests of retries and SMR memory.
func (x *XTR) SetClock(now func() time.Time) { x.now = now }

// build reads database mappings, keeping the R bits of the locators that
// stayed the same in mappings it already has.
func (x *XTR) build(cfgs []config.DatabaseMapping) ([]*dbMapping, error) {
	var out []*dbMapping
	for _, c := range cfgs {
		p, err := (config.EIDPrefix{Prefix: c.EIDPrefix}).Parse()
		if err != nil {
			return nil, fmt.Errorf("xtr: %w", err)
		}
		m := &dbMapping{eid: mapping.NewEID(x.iid, p), cfg: c, reachable: make([]bool, len(c.Locators))}
		for i := range m.reachable {
			m.reachable[i] = true
		}
		if old, ok := x.db.Get(m.eid); ok {
			for i, l := range c.Locators {
				for j, ol := range old.cfg.Locators {
					if sameLocator(l, ol) {
						m.reachable[i] = old.reachable[j]
					}
				}
			}
		}
		if m.record, err = m.build(); err != nil {
			return nil, fmt.Errorf("xtr: %s: %w", c.EIDPrefix, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// build makes the EID-record of the mapping, as Map-Registers and
// Map-Replies carry it: authoritative (the A bit: this ETR owns the
// prefix, RFC 9301 §5.4, which §5.6's Map-Register reuses), the locators
// in configuration order, a plain RLOC as an address, an ELP as an ELP
// LCAF with the hops' bits, none of them for multicast (M-priority 255).
func (m *dbMapping) build() (lisp.MapRecord, error) {
	eid, maskLen := m.eid.Wire()
	rec := lisp.MapRecord{TTL: uint32(m.cfg.TTL.Minutes()), EID: eid, MaskLen: maskLen, Authoritative: true}
	for i, l := range m.cfg.Locators {
		a, err := locatorAddress(l)
		if err != nil {
			return lisp.MapRecord{}, err
		}
		rec.Locators = append(rec.Locators, lisp.Locator{
			Priority: l.Priority, Weight: l.Weight, MPriority: lisp.UnusedPriority,
			Reachable: m.reachable[i], Address: a,
		})
	}
	return rec, nil
}

func locatorAddress(l config.LocatorConfig) (lisp.Address, error) {
	if len(l.ELP) == 0 {
		ip, err := netip.ParseAddr(l.Address)
		if err != nil {
			return lisp.Address{}, fmt.Errorf("locator %q is not an IP address", l.Address)
		}
		return lisp.IPAddress(ip), nil
	}
	elp := &lisp.ELP{}
	for _, h := range l.ELP {
		ip, err := netip.ParseAddr(h.Address)
		if err != nil {
			return lisp.Address{}, fmt.Errorf("ELP hop %q is not an IP address", h.Address)
		}
		elp.Hops = append(elp.Hops, lisp.ELPHop{Address: lisp.IPAddress(ip), Lookup: h.Lookup, RLOCProbe: h.Probe, Strict: h.Strict})
	}
	return lisp.LCAFAddress(elp), nil
}

func sameLocator(a, b config.LocatorConfig) bool {
	if a.Address != b.Address || len(a.ELP) != len(b.ELP) {
		return false
	}
	for i := range a.ELP {
		if a.ELP[i] != b.ELP[i] {
			return false
		}
	}
	return true
}

// LocalPrefixes are the site's EID-prefixes, which the ITR forwards
// natively.
func (x *XTR) LocalPrefixes() []dataplane.Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	keys := make([]dataplane.Key, len(x.mappings))
	for i, m := range x.mappings {
		keys[i] = dataplane.Key{InstanceID: m.eid.IID, Prefix: m.eid.Prefix}
	}
	return keys
}

// Owns reports whether eid is in one of the site's EID-prefixes: the
// daemon gives the Map-Requests for it to the xtr.
func (x *XTR) Owns(iid uint32, eid netip.Addr) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.db.Lookup(iid, eid.Unmap())
	return ok
}

// tickEvery is how often the xtr's timers are checked: retries wait a
// second, so a tenth of it is precise enough.
const tickEvery = 100 * time.Millisecond

// Run registers with the map-servers, at once and every register
// interval, retries unacknowledged registrations, forgets the ITRs it
// answered long ago, and answers the stateful requests that wait for
// their subflow, until ctx is done.
func (x *XTR) Run(ctx context.Context) {
	x.Tick()
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	// Stateful requests wait for their SYN at most synWait: looked at
	// more often than the other timers.
	fast := time.NewTicker(waitingEvery)
	defer fast.Stop()
	if !x.stateful {
		fast.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			x.Tick()
		case <-fast.C:
			x.TickWaiting()
		}
	}
}

// waitingEvery is how often stateful requests that wait for their
// subflow are looked at.
const waitingEvery = 10 * time.Millisecond

// sweepEvery is how often the bindings are swept: a binding ends within
// it of its subflow.
const sweepEvery = time.Second

// Tick does what the timers say is due.
func (x *XTR) Tick() {
	now := x.now()
	x.mu.Lock()
	out := x.registerDue(now)
	x.forgetITRs(now)
	x.expireSets(now)
	out = append(out, x.answerWaiting(now)...)
	if now.Sub(x.swept) >= sweepEvery {
		x.sweepBindings(now)
		x.swept = now
	}
	x.mu.Unlock()
	x.transmit(out)
}

// TickWaiting answers the stateful requests whose subflow came, or that
// waited long enough.
func (x *XTR) TickWaiting() {
	now := x.now()
	x.mu.Lock()
	if len(x.waiting) == 0 {
		x.mu.Unlock()
		return
	}
	out := x.answerWaiting(now)
	x.mu.Unlock()
	x.transmit(out)
}

type datagram struct {
	dst netip.AddrPort
	b   []byte
}

func (x *XTR) transmit(out []datagram) {
	for _, dg := range out {
		if err := x.send.Send(dg.dst, dg.b); err != nil {
			x.counter.sendErrors.Add(1)
			x.log.Debug("send", "to", dg.dst, "error", err)
		}
	}
}
