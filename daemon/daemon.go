// Package daemon is lispd: it runs the roles a configuration names on the
// control sockets it opens (UDP 4342), drives the data plane of the tunnel
// roles (xtr, rtr), and answers the control socket that `lispd status`
// talks to. It is the one Go API of the daemon; the configuration file,
// the command line and the control socket are its clients.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/ddt"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/internal/ctlsock"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Daemon is a running lispd.
type Daemon struct {
	log     *slog.Logger
	started time.Time
	opts    options

	mu         sync.Mutex
	cfg        *config.Config // as running: what reloads applied
	lastReload *Reload
	exit       chan exit // asks Run to end: Restart, Stop

	ms  *mapserver.Server // nil unless the map-server role runs
	mr  *resolver.Resolver
	ddt *ddt.Authority // answers DDT Map-Requests: nil unless ddt-node or map-server runs
	te  *pce.Engine    // nil unless the te role runs
	tun *tunnel        // nil unless the xtr or rtr role runs

	conns   []*conn
	ctl     net.Listener // nil without a control socket
	prof    profiler
	counter counters
}

// New builds the roles of a validated configuration and opens its control
// sockets; for the xtr and rtr roles, it loads the data plane. Run serves
// them; Close releases them if Run is never called.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Daemon, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := options{dataplane: newDataplane, loops: runtime.GOMAXPROCS(0)}
	for _, opt := range opts {
		opt(&o)
	}
	d := &Daemon{cfg: cfg, log: log, started: time.Now(), opts: o, exit: make(chan exit, 1), prof: profiler{dir: o.profiles}}
	if cfg.Has(config.RoleMapServer) {
		ms, err := mapserver.New(cfg.MapServer, log)
		if err != nil {
			return nil, fmt.Errorf("map-server: %w", err)
		}
		d.ms = ms
	}
	if cfg.Has(config.RoleMapResolver) {
		mr, err := d.newResolver(cfg, log)
		if err != nil {
			return nil, err
		}
		d.mr = mr
	}
	authority, err := d.newAuthority(cfg, log)
	if err != nil {
		return nil, err
	}
	d.ddt = authority
	if cfg.Has(config.RoleTE) {
		opts := pce.Options{Sender: control.SenderFunc(d.send), LocalRLOCs: d.localRLOCs, Fetch: o.teFetch, Log: log}
		if d.ms != nil {
			opts.Registrations = d.ms.Registered
			send := control.SenderFunc(d.send)
			opts.Push = func(eid mapping.EID, records []lisp.MapRecord) int { return d.ms.Push(eid, records, send) }
		}
		d.te = pce.New(cfg.TE, opts)
		if d.mr != nil {
			d.mr.SetEngineer(d.te)
		}
	}
	if path := cfg.Control.Socket; path != "" {
		ln, err := ctlsock.Listen(path, "lispd")
		if err != nil {
			d.Close()
			return nil, err
		}
		d.ctl = ln
	}
	for _, l := range cfg.Listen {
		ap, err := config.ListenAddr(l)
		if err != nil {
			d.Close()
			return nil, err
		}
		c, err := listen(ap, o.loops)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.conns = append(d.conns, c)
	}
	if cfg.Has(config.RoleXTR) || cfg.Has(config.RoleRTR) {
		tun, err := d.newTunnel(cfg, o.dataplane)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.tun = tun
	}
	return d, nil
}

// Addrs are the addresses the control sockets are bound to (with the
// ports the kernel chose for port 0).
func (d *Daemon) Addrs() []netip.AddrPort {
	addrs := make([]netip.AddrPort, len(d.conns))
	for i, c := range d.conns {
		addrs[i] = c.local
	}
	return addrs
}

// MapServer is the map-server role, or nil.
func (d *Daemon) MapServer() *mapserver.Server { return d.ms }

// XTR is the xtr role's control plane (an answerer of probes only for
// the rtr role), or nil: its Update and SetLocatorReachable change what
// the site registers and solicit Map-Requests from the ITRs that use it.
func (d *Daemon) XTR() *xtr.XTR {
	if d.tun == nil {
		return nil
	}
	return d.tun.xtr
}

// Run serves the control sockets until ctx is done (SIGTERM, SIGINT),
// Stop or Restart, then closes them. The data plane of the tunnel roles
// is detached, unless lispd restarts or keep-on-exit keeps it: then it
// stays pinned, forwarding, for the next lispd. After Restart, Run
// returns ErrRestart.
func (d *Daemon) Run(ctx context.Context) error {
	d.log.Info("lispd running", "roles", d.config().Roles, "listen", d.Addrs())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range d.conns {
		for _, s := range c.sockets() {
			wg.Go(func() { d.serve(s) })
		}
	}
	if d.ms != nil {
		wg.Go(func() { d.tickMapServer(ctx) })
	}
	if d.mr != nil {
		wg.Go(func() { d.mr.Run(ctx) }) // DDT retries; returns at once without DDT
	}
	if d.ctl != nil {
		wg.Go(func() { d.serveControl(ctx) })
	}
	if d.te != nil {
		wg.Go(func() { d.te.Run(ctx) })
	}
	if d.tun != nil {
		d.tun.run(ctx, &wg)
	}
	how := exitSignal
	select {
	case <-ctx.Done():
	case how = <-d.exit:
	}
	cancel()
	d.closeSockets()
	wg.Wait()
	// The data plane goes last: until the loops return, they use it.
	keep := how == exitRestart || (how == exitSignal && d.config().Dataplane != nil && d.config().Dataplane.KeepOnExit)
	d.closeDataplane(keep)
	if how == exitRestart {
		d.log.Info("lispd restarting")
		return ErrRestart
	}
	d.log.Info("lispd stopped")
	return nil
}

// Close closes the sockets, then detaches the data plane; serving loops
// return.
func (d *Daemon) Close() {
	d.closeSockets()
	d.closeDataplane(false)
}

func (d *Daemon) closeSockets() {
	for _, c := range d.conns {
		c.close()
	}
	if d.ctl != nil {
		d.ctl.Close()
	}
}

func (d *Daemon) closeDataplane(keep bool) {
	if d.tun == nil {
		return
	}
	if err := d.tun.closeDataplane(keep); err != nil {
		d.log.Error("close the data plane", "error", err)
		return
	}
	if keep {
		d.log.Info("data plane left forwarding for the next lispd", "pin_path", d.tun.dp.Pinning().Path)
	}
}

// tickMapServer drops expired registrations and sends the Map-Notifies
// that are due every second: registrations last minutes and Map-Notifies
// are sent again after seconds, so a second is precise enough and costs
// nothing.
func (d *Daemon) tickMapServer(ctx context.Context) {
	var gc *gcPolicy
	if d.opts.gcTarget {
		gc = newGCPolicy(d.log)
		gc.tick(d.ms.Len())
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.ms.Expire()
			d.ms.NotifyDue(control.SenderFunc(d.send))
			if gc != nil {
				gc.tick(d.ms.Len())
			}
		}
	}
}
