// Package pce is the te role of lispd: a path computation element for
// the LISP-TE overlay ([LISP-TE] §V). It learns the overlay's routers
// (the xTRs from their registrations with the map-server beside it, the
// RTRs from its configuration), reads the RTT matrix from their RLOC
// probing (each router's /metrics), computes for every active (source,
// destination) pair of xTRs a set of Explicit Locator Paths with package
// te, and gives the map-resolver, for each Map-Request, the mapping that
// carries them: the destination's ELPs in stable slots (a path ID names
// the same ELP at every router), those of the requester's set usable,
// the others at priority 255. Sets are computed again periodically and
// on events, with hysteresis, and the routers that asked for a mapping
// that changed get a Solicit-Map-Request.
package pce

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/te"
)

// Options are what the te role takes from outside its configuration.
type Options struct {
	// Registrations lists the map-server's registrations; nil without a
	// map-server beside the te role.
	Registrations func() []mapserver.Registered
	// Fetch reads a node's metrics; nil reads them over HTTP.
	Fetch func(ctx context.Context, url string) ([]Row, error)
	// Push has the map-server send the ETRs of a prefix that answer
	// for themselves the records of its sets (mapserver.Push), and says
	// how many ETRs it sent to; nil without a map-server.
	Push func(eid mapping.EID, records []lisp.MapRecord) int
	// Sender sends the Solicit-Map-Requests, from LocalRLOCs.
	Sender     control.Sender
	LocalRLOCs func() []netip.Addr
	Log        *slog.Logger
}

// Engine is the te role. Its methods are safe for concurrent use.
type Engine struct {
	cfg        *config.TE
	rules      te.Rules
	hyst       te.Hysteresis
	regs       func() []mapserver.Registered
	fetch      func(ctx context.Context, url string) ([]Row, error)
	send       control.Sender
	pushFn     func(eid mapping.EID, records []lisp.MapRecord) int
	localRLOCs func() []netip.Addr
	log        *slog.Logger
	now        func() time.Time
	workers    int

	mu      sync.Mutex
	nodes   map[string]*node // by name
	byAddr  map[netip.Addr]*node
	byEID   map[mapping.EID]*node // registered prefixes -> their xTR
	sites   *mapping.Table[*node] // the same, for longest-prefix matches
	iids    []uint32              // the instances of sites
	learnt  time.Time             // when the registrations were last read
	snap    *snapshot             // the graph of the latest RTTs
	pairs   map[pairKey]*pair
	dests   map[string]*dest
	unknown map[asker]unknownAsk // requests for prefixes the role did not know
	counter counters
}

// New returns the te role of a validated configuration.
func New(cfg *config.TE, opts Options) *Engine {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:        cfg,
		rules:      rulesOf(cfg),
		hyst:       hysteresisOf(cfg),
		regs:       opts.Registrations,
		fetch:      opts.Fetch,
		send:       opts.Sender,
		pushFn:     opts.Push,
		localRLOCs: opts.LocalRLOCs,
		log:        log.With("component", "te"),
		now:        time.Now,
		workers:    runtime.GOMAXPROCS(0),
		nodes:      map[string]*node{},
		byAddr:     map[netip.Addr]*node{},
		byEID:      map[mapping.EID]*node{},
		sites:      mapping.NewTable[*node](),
		pairs:      map[pairKey]*pair{},
		dests:      map[string]*dest{},
		unknown:    map[asker]unknownAsk{},
	}
	if e.fetch == nil {
		client := &http.Client{Timeout: min(cfg.CollectInterval.Duration, 2*time.Second)}
		e.fetch = func(ctx context.Context, url string) ([]Row, error) { return Scrape(ctx, client, url) }
	}
	if e.localRLOCs == nil {
		e.localRLOCs = func() []netip.Addr { return nil }
	}
	for _, n := range cfg.Nodes {
		nd := &node{name: n.Name, role: n.Role, addrs: n.Addrs(), metrics: n.MetricsURL(cfg.MetricsPort), configured: true}
		e.nodes[n.Name] = nd
	}
	e.index()
	e.snap = e.build(time.Time{})
	for _, p := range cfg.Pairs {
		k := pairKey{p.Source, p.Destination}
		e.pairs[k] = &pair{key: k, configured: true, tracker: te.NewTracker(e.hyst)}
	}
	return e
}

// SetClock replaces time.Now, for tests of hysteresis and expiry.
func (e *Engine) SetClock(now func() time.Time) { e.now = now }

func rulesOf(cfg *config.TE) te.Rules {
	h := cfg.HeadOfLine
	window, _ := config.ParseBytes(h.ReceiveWindow) // validated
	r := te.Rules{
		Max: cfg.MaxELPs, Disjoint: cfg.Disjoint,
		Factor: *h.RTTFactor, Spread: h.MaxSpread.Seconds(),
		Gain: h.Gain,
	}
	if len(h.Capacities) > 0 {
		r.Window = float64(window)
	}
	return r
}

func hysteresisOf(cfg *config.TE) te.Hysteresis {
	y := cfg.Hysteresis
	return te.Hysteresis{Confirm: y.Confirm, HoldDown: y.HoldDown.Duration, Gain: y.Gain, MinGain: y.MinGain.Seconds()}
}

// Run reads the RTTs every collect-interval, then computes again the sets
// the new RTTs touch (a path down, an RTT moved by a quarter), computes
// every set every interval, and forgets idle pairs, until ctx is done.
func (e *Engine) Run(ctx context.Context) {
	e.Collect(ctx)
	collect := time.NewTicker(e.cfg.CollectInterval.Duration)
	defer collect.Stop()
	refresh := time.NewTicker(e.cfg.Interval.Duration)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-collect.C:
			e.Collect(ctx)
		case <-refresh.C:
			e.Refresh(nil)
		}
	}
}

// Collect learns the nodes from the registrations, reads every node's
// RTTs, builds the graph of the overlay again, computes the sets that
// the changes touch, and forgets the pairs no one asked about for three
// TTLs.
func (e *Engine) Collect(ctx context.Context) {
	e.learn()
	e.scrape(ctx)
	now := e.now()
	e.mu.Lock()
	e.snap = e.build(now)
	touched := e.touched()
	e.expire(now)
	e.mu.Unlock()
	if len(touched) > 0 {
		e.Refresh(func(p *pair) bool { return touched[p.key] })
	}
}
