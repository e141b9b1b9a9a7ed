package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/probe"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/dataplane"
)

// Dataplane is what the xtr and rtr roles need of the data plane: the
// methods of *dataplane.Dataplane, as an interface so that tests run the
// daemon with a fake.
type Dataplane interface {
	Put(dataplane.Key, dataplane.Entry) error
	Delete(dataplane.Key) error
	Misses() <-chan dataplane.Miss
	LocalRLOCs() []netip.Addr
	Subflows() ([]dataplane.Subflow, error)
	Counters() (dataplane.Counters, error)
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
	profiles  string // WithProfiles
	loops     int    // WithLoops
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
	close  sync.Once
}

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
	t := &tunnel{dp: dp}
	send := control.SenderFunc(d.send)
	rlocs := d.localRLOCs
	if t.xtr, err = xtr.New(cfg.XTR, xtr.Options{
		InstanceID: cfg.Dataplane.InstanceID, Sender: send, LocalRLOCs: rlocs, Log: d.log,
	}); err != nil {
		t.dp.Close()
		return nil, err
	}
	cacheOpts := mapcache.Options{Forwarder: dp, Sender: send, LocalRLOCs: rlocs, Port: d.port(), Log: d.log}
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
	if t.cache, err = mapcache.New(cfg.MapCache, cacheOpts); err != nil {
		t.dp.Close()
		return nil, err
	}
	if err := t.cache.SetLocal(t.xtr.LocalPrefixes()); err != nil {
		t.dp.Close()
		return nil, fmt.Errorf("map-cache: site's EID-prefixes: %w", err)
	}
	return t, nil
}

func (t *tunnel) probeTargets() []probe.Target {
	locs := t.cache.Locators()
	targets := make([]probe.Target, len(locs))
	for i, l := range locs {
		targets[i] = probe.Target{Addr: l.Addr, EID: l.EID}
	}
	return targets
}

// run starts the roles' loops; they return when ctx is done.
func (t *tunnel) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { t.cache.Run(ctx, t.dp.Misses()) })
	wg.Go(func() { t.xtr.Run(ctx) })
	if t.prober != nil {
		wg.Go(func() { t.prober.Run(ctx) })
	}
}

// closeDataplane detaches the data plane, once.
func (t *tunnel) closeDataplane() error {
	var err error
	t.close.Do(func() { err = t.dp.Close() })
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
