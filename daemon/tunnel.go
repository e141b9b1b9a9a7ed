package daemon

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
	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/control/probe"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/mapping"
)

// Dataplane is what the xtr and rtr roles need of the data plane: the
// methods of *dataplane.Dataplane, as an interface so that tests run the
// daemon with a fake.
type Dataplane interface {
	Put(dataplane.Key, dataplane.Entry) error
	Delete(dataplane.Key) error
	Misses() <-chan dataplane.Miss
	// Held delivers the packets the ITR hands over to hold (miss:
	// hold), Release sends them on.
	Held() <-chan dataplane.Held
	Release([]dataplane.Held) error
	LocalRLOCs() []netip.Addr
	Subflows() ([]dataplane.Subflow, error)
	Counters() (dataplane.Counters, error)
	// SubflowEvents, Pin and Subflow are the data plane's side of
	// stateful binding (mptcp-subflows bind-stateful): the subflows to
	// ask the paths of, where to put them, and the ETR's subflow table.
	SubflowEvents() <-chan dataplane.SubflowEvent
	Pin(f dataplane.Flow, path int) error
	Subflow(f dataplane.Flow) (dataplane.Subflow, bool, error)
	// Stored lists the map-cache entries the data plane held when it
	// started (adopted from the lispd before); Adoption says what it
	// took over; Pinning where it is kept across restarts.
	Stored() []dataplane.StoredEntry
	Adoption() *dataplane.Adoption
	Pinning() dataplane.Pinning
	// Keep leaves the data plane forwarding, pinned, for the next lispd;
	// Close detaches it.
	Keep() error
	Close() error
}

// DataplaneFunc creates the data plane of the tunnel roles.
type DataplaneFunc func(*config.Dataplane, dataplane.Options) (Dataplane, error)

// newDataplane is the real one: the eBPF programs and maps.
func newDataplane(cfg *config.Dataplane, opts dataplane.Options) (Dataplane, error) {
	dp, err := dataplane.New(cfg, opts)
	if err != nil {
		return nil, err // not a nil *Dataplane in a non-nil interface
	}
	return dp, nil
}

// Option changes how New builds the daemon.
type Option func(*options)

type options struct {
	dataplane DataplaneFunc
	cfgFile   string         // what Reload reads and Restart checks
	level     *slog.LevelVar // what Reload sets log.level in
	profiles  string         // WithProfiles
	loops     int            // WithLoops
	gcTarget  bool           // WithCollectorTarget
	teFetch   func(ctx context.Context, url string) ([]pce.Row, error)
}

// WithTEFetch replaces how the te role reads a router's RTTs (an HTTP
// GET of its metrics by default): tests read them in a namespace.
func WithTEFetch(f func(ctx context.Context, url string) ([]pce.Row, error)) Option {
	return func(o *options) { o.teFetch = f }
}

// WithDataplane replaces the data plane that the xtr and rtr roles drive,
// dataplane.New by default; tests give a fake.
func WithDataplane(f DataplaneFunc) Option {
	return func(o *options) { o.dataplane = f }
}

// tunnel is the control plane of the xtr and rtr roles: the map-cache,
// the xtr (registration and answers; for an RTR only probe answers) and
// RLOC probing, around the data plane.
type tunnel struct {
	dp     Dataplane
	cache  *mapcache.Cache
	xtr    *xtr.XTR
	prober *probe.Prober // nil with probing off
	// peers are probed besides the locators in use: the probe-peers and
	// the RTRs of the overlay join.
	peers []probe.Target
	join  *xtr.Join // nil without xtr.join
	every time.Duration
	close sync.Once
}

// A tunnel starts with what the data plane adopted from the lispd
// before it: the site's prefixes and the static entries are installed
// first, then the rest of the adopted map-cache is taken over, to be
// asked for again.

// newTunnel builds the tunnel roles of a validated configuration, once
// d's sockets are open: the roles send through them, from Run on.
func (d *Daemon) newTunnel(cfg *config.Config, newDP DataplaneFunc) (*tunnel, error) {
	dp, err := newDP(cfg.Dataplane, dataplane.Options{
		MapCacheEntries: cfg.MapCache.MaxEntries,
		MissInterval:    cfg.MapCache.MissInterval.Duration,
		RTR:             cfg.Has(config.RoleRTR),
		Log:             d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	t := &tunnel{dp: dp, peers: peerTargets(cfg)}
	send := control.SenderFunc(d.send)
	rlocs := d.localRLOCs
	stateful := cfg.Dataplane.Stateful()
	if t.xtr, err = xtr.New(cfg.XTR, xtr.Options{
		InstanceID: cfg.Dataplane.InstanceID, Sender: send, LocalRLOCs: rlocs, Log: d.log,
		Stateful: stateful, Subflow: dp.Subflow,
	}); err != nil {
		t.dp.Close()
		return nil, err
	}
	cacheOpts := mapcache.Options{Forwarder: dp, Sender: send, LocalRLOCs: rlocs, Port: d.port(), Log: d.log}
	if cfg.Dataplane.Miss == "hold" {
		cacheOpts.Release = dp.Release
	}
	if cfg.XTR != nil {
		cacheOpts.SiteEIDs = t.xtr.LocalPrefixes
	}
	if stateful {
		cacheOpts.Pinner = dp
	}
	if iv := cfg.MapCache.ProbeInterval.Duration; iv > 0 {
		// The prober and the map-cache know of each other through
		// functions: the prober asks the cache which locators are in use
		// and tells it when one changes; the cache asks the prober which
		// are up.
		t.prober, err = probe.New(probe.Options{
			Interval: iv, Misses: cfg.MapCache.ProbeMisses, Sender: send, LocalRLOCs: rlocs,
			Targets:  t.probeTargets,
			OnChange: func(addr netip.Addr, _ bool) { t.cache.LocatorChanged(addr) },
			Log:      d.log,
		})
		if err != nil {
			t.dp.Close()
			return nil, err
		}
		cacheOpts.Reachable, cacheOpts.RTT = t.prober.Up, t.prober.RTT
	}
	if x := cfg.XTR; x != nil && x.Join != nil && t.prober != nil {
		t.join, t.every = xtr.NewJoin(x, t.xtr), cfg.MapCache.ProbeInterval.Duration
	}
	if t.cache, err = mapcache.New(cfg.MapCache, cacheOpts); err != nil {
		t.dp.Close()
		return nil, err
	}
	if err := t.cache.SetLocal(t.xtr.LocalPrefixes()); err != nil {
		t.dp.Close()
		return nil, fmt.Errorf("map-cache: site's EID-prefixes: %w", err)
	}
	if _, err := t.cache.SetStatic(cfg.MapCache.Static, cfg.Dataplane.InstanceID); err != nil {
		t.dp.Close()
		return nil, err
	}
	if n := t.cache.Adopt(dp.Stored()); n > 0 {
		d.log.Info("map-cache entries adopted: asking for each again", "entries", n)
	}
	return t, nil
}

func (t *tunnel) probeTargets() []probe.Target {
	locs := t.cache.Locators()
	targets := make([]probe.Target, len(locs), len(locs)+len(t.peers))
	for i, l := range locs {
		targets[i] = probe.Target{Addr: l.Addr, EID: l.EID}
	}
	return append(targets, t.peers...)
}

// peerTargets are the addresses probed whether or not a mapping uses
// them. Their probes ask about the peer's own address, a host EID of
// instance 0: a peer answers a probe for an EID it does not hold with an
// empty record, which is all the RTT needs.
func peerTargets(cfg *config.Config) []probe.Target {
	var addrs []string
	if mc := cfg.MapCache; mc != nil {
		addrs = append(addrs, mc.ProbePeers...)
	}
	if x := cfg.XTR; x != nil && x.Join != nil {
		addrs = append(addrs, x.Join.RTRs...)
	}
	var out []probe.Target
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err == nil { // validated
			out = append(out, probe.Target{Addr: a.Unmap(), EID: mapping.HostEID(0, a.Unmap())})
		}
	}
	return out
}

// run starts the roles' loops; they return when ctx is done.
func (t *tunnel) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { t.cache.Run(ctx, t.dp.Misses(), t.dp.Held()) })
	wg.Go(func() { t.askSubflows(ctx) })
	wg.Go(func() { t.xtr.Run(ctx) })
	if t.prober != nil {
		wg.Go(func() { t.prober.Run(ctx) })
	}
	if t.join != nil {
		wg.Go(func() { t.joinLoop(ctx) })
	}
}

// askSubflows has the map-cache ask for the path of each subflow the
// data plane reports (only with mptcp-subflows bind-stateful).
func (t *tunnel) askSubflows(ctx context.Context) {
	events := t.dp.SubflowEvents()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			t.cache.Subflow(ev)
		}
	}
}

// joinLoop chooses the overlay join's RTRs again every probe interval.
func (t *tunnel) joinLoop(ctx context.Context) {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			t.join.Evaluate(now, t.prober.RTT, t.prober.Up) // logs what it does
		}
	}
}

// closeDataplane detaches the data plane, or, with keep, leaves it
// pinned for the next lispd; once. A data plane that cannot be kept is
// detached, and the error says why.
func (t *tunnel) closeDataplane(keep bool) error {
	var err error
	t.close.Do(func() {
		if keep {
			if err = t.dp.Keep(); err == nil {
				return
			}
		}
		err = errors.Join(err, t.dp.Close())
	})
	return err
}

// localRLOCs are the addresses Map-Requests, probes and SMRs ask to be
// answered at: the data plane's RLOC addresses, or, when it has none
// (a data plane not yet up, or one in a test), the specific addresses
// lispd listens on.
func (d *Daemon) localRLOCs() []netip.Addr {
	if d.tun != nil {
		if a := d.tun.dp.LocalRLOCs(); len(a) > 0 {
			return a
		}
	}
	var out []netip.Addr
	for _, c := range d.conns {
		if a := c.local.Addr(); !a.IsUnspecified() {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// port is the UDP port lispd listens on, where answers come back: 4342
// but in tests. With sockets on several ports, the first one's.
func (d *Daemon) port() uint16 {
	if len(d.conns) == 0 {
		return control.Port
	}
	return d.conns[0].local.Port()
}

// send sends a datagram from port 4342 (the socket of dst's family) for
// the roles that send from their own goroutines. A *net.UDPConn is safe
// for concurrent use, beside the serving loop's batches.
func (d *Daemon) send(dst netip.AddrPort, b []byte) error {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	c := d.connFor(nil, dst.Addr())
	if c == nil {
		d.counter.unroutable.Add(1)
		return fmt.Errorf("no socket for %s", dst)
	}
	if _, err := c.udp.WriteToUDPAddrPort(b, dst); err != nil {
		d.counter.sendErrors.Add(1)
		return err
	}
	d.counter.sent.Add(1)
	return nil
}
