// Package pm is the A-MPTCP path manager, `amptcp pm`: it drives the
// kernel's MPTCP userspace path manager over generic netlink. For every
// connection that becomes established it applies a policy (amptcp: as
// many subflows as the mapping system shows paths between the two LISP
// sites, [A-MPTCP] §III; or subflows, fullmesh, ndiffports, default),
// opens the subflows with source ports that put each on its own path at
// a port-sum xTR, and repairs them when they break and their path comes
// back. On the server side it is the events listener that joins need,
// and announces addresses.
//
// New and Run are the one Go API of the daemon; its configuration file
// (Config), command line (`amptcp pm`) and control socket are clients of
// it. The engine that holds the state is driven by Run's goroutine only;
// other goroutines read events, resolve mappings and answer the control
// socket, and talk to it through channels.
package pm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/amptcp/amptcp/mptcp"
)

// Deps are what the daemon talks to. Run opens, in the network namespace
// of its calling thread, the real ones for the fields left nil: the
// mptcp_pm client and event listener, sock_diag, the sysctl of the path
// manager, rtnetlink link and address changes, the interfaces' addresses,
// the ephemeral port range, and lig for the amptcp policy's lookups.
type Deps struct {
	Kernel      Kernel
	Diag        Diag
	Events      EventSource // closed by Run when it returns
	Mapper      Mapper
	PathManager PathManagerSetting
	// Links gets a value when a link comes up or an address is added.
	Links <-chan struct{}
	// LocalAddrs lists the host's usable addresses: up, not loopback.
	LocalAddrs func() ([]netip.Addr, error)
	// PortRange is the ephemeral port range.
	PortRange func() (lo, hi uint16, err error)
	// Log gets structured logs; nil discards them.
	Log *slog.Logger
	// Now and Rand replace the clock and the port randomness in tests.
	Now  func() time.Time
	Rand func(n int) int
}

// PathManagerSetting reads and sets net.mptcp.path_manager.
type PathManagerSetting interface {
	PathManager() (string, error)
	SetPathManager(name string) error
}

// Daemon is the path manager.
type Daemon struct {
	cfg  *Config
	deps Deps
	log  *slog.Logger
	e    *engine

	started time.Time
	prevPM  string
	addrs   []netip.Addr
	ports   portRange

	reqs    chan func(*engine)
	lookups chan lookupResult
	stopped chan struct{}
	final   Status // after Run returned
}

type lookupResult struct {
	q    Query
	m    Mapping
	took time.Duration
	err  error
}

// New returns a daemon for a validated configuration. Nothing is opened
// before Run.
func New(cfg *Config, deps Deps) (*Daemon, error) {
	if cfg == nil {
		return nil, errors.New("pm: no configuration")
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "pm")
	d := &Daemon{
		cfg:     cfg,
		deps:    deps,
		log:     log,
		e:       newEngine(cfg, log),
		ports:   defaultPorts,
		reqs:    make(chan func(*engine)),
		lookups: make(chan lookupResult, 64),
		stopped: make(chan struct{}),
	}
	if deps.Now != nil {
		d.e.now = deps.Now
	}
	d.e.rand = rand.IntN
	if deps.Rand != nil {
		d.e.rand = deps.Rand
	}
	d.e.localAddrs = func() []netip.Addr { return d.addrs }
	d.e.ports = func() portRange { return d.ports }
	return d, nil
}

// Run switches the namespace to the userspace path manager, adopts the
// MPTCP connections that exist, and manages them and the new ones until
// ctx is done; then it restores the previous path manager. Subflows are
// left as they are on exit: connections outlive the daemon.
//
// Run works in the network namespace of the calling thread, and stays on
// that thread: call it from a thread locked into another namespace to
// manage that one. A Daemon runs once.
func (d *Daemon) Run(ctx context.Context) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer d.stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closeSystem, err := d.openSystem()
	if err != nil {
		return err
	}
	defer closeSystem()
	defer d.deps.Events.Close()
	d.e.k, d.e.diag = d.deps.Kernel, d.deps.Diag
	ns := currentNamespace()
	defer ns.close()
	d.e.lookup = d.lookupFunc(ctx, ns)

	if d.prevPM, err = d.deps.PathManager.PathManager(); err != nil {
		return fmt.Errorf("pm: read the path manager: %w", err)
	}
	if err := d.deps.PathManager.SetPathManager("userspace"); err != nil {
		return fmt.Errorf("pm: switch to the userspace path manager: %w", err)
	}
	if g := d.cfg.Congestion; g != nil {
		undo, err := d.applyCongestion(g)
		if err != nil {
			d.deps.PathManager.SetPathManager(d.prevPM)
			return err
		}
		defer undo()
	}
	defer func() {
		if rerr := d.deps.PathManager.SetPathManager(d.prevPM); rerr != nil && err == nil {
			err = fmt.Errorf("pm: restore the path manager %q: %w", d.prevPM, rerr)
		}
		d.log.Info("stopped", "path_manager", d.prevPM, "error", err)
	}()

	// Events are read before the state is: what happens in between is
	// seen twice rather than not at all, and the engine takes both.
	events := make(chan eventBatch, 1024)
	stopEvents := context.AfterFunc(ctx, func() { d.deps.Events.Close() })
	defer stopEvents()
	go d.readEvents(ctx, events)
	d.started = time.Now()
	d.refresh()
	d.resync(true)

	if path := d.cfg.Control.Socket; path != "" {
		if err := d.serveControl(ctx, path); err != nil {
			return err
		}
	}
	d.log.Info("running", "policy", d.cfg.Policy, "path_manager_before", d.prevPM, "connections", len(d.e.conns))
	return d.loop(ctx, events)
}

// loop is the engine's goroutine.
func (d *Daemon) loop(ctx context.Context, events <-chan eventBatch) error {
	every := min(d.cfg.PollInterval.Duration, d.cfg.Repair.Interval.Duration)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case b, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return nil // closed because Run ends
				}
				return errors.New("pm: the event stream ended")
			}
			d.e.count.malformed = b.malformed
			for _, ev := range b.events {
				d.e.event(ev)
			}
			if b.lost {
				d.log.Warn("events lost: reading the state again")
				d.resync(false)
			}
		case r := <-d.lookups:
			d.e.lookupDone(r.q, r.m, r.took, r.err)
		case <-d.deps.Links:
			d.drainLinks()
			d.refresh()
			d.e.linkChanged()
		case <-ticker.C:
			d.e.tick()
		case fn := <-d.reqs:
			fn(d.e)
		}
	}
}

// drainLinks takes the rest of a burst of link notifications (a link
// that comes up brings its addresses and routes), so that the engine
// reacts once.
func (d *Daemon) drainLinks() {
	timer := time.NewTimer(2 * time.Millisecond)
	defer timer.Stop()
	for {
		select {
		case <-d.deps.Links:
		case <-timer.C:
			return
		}
	}
}

// refresh reads what the engine takes from the host: the addresses, the
// port range and the kernel's limits.
func (d *Daemon) refresh() {
	if addrs, err := d.deps.LocalAddrs(); err != nil {
		d.log.Warn("read local addresses", "error", err)
	} else {
		d.addrs = addrs
	}
	if lo, hi, err := d.deps.PortRange(); err != nil {
		d.log.Warn("read the ephemeral port range", "error", err)
	} else {
		d.ports = portRange{lo, hi}
	}
	if l, err := d.deps.Kernel.Limits(); err != nil {
		d.log.Warn("read the kernel's MPTCP limits", "error", err)
	} else {
		d.e.setLimits(l)
	}
}

// resync reads the connections and subflows from sock_diag into the
// engine.
func (d *Daemon) resync(starting bool) {
	if !starting {
		d.e.count.resyncs++
		d.refresh()
	}
	conns, err := d.deps.Diag.Connections()
	if err == nil {
		var subs []SubflowInfo
		if subs, err = d.deps.Diag.Subflows(); err == nil {
			d.e.resync(conns, subs, starting)
			return
		}
	}
	d.log.Error("read the MPTCP sockets", "error", err)
}

// eventBatch is what one Receive gave.
type eventBatch struct {
	events    []mptcp.Event
	lost      bool
	malformed uint64
}

// readEvents passes the event stream to the engine until ctx is done.
// It keeps reading while the engine works, so that a burst waits in the
// channel rather than overrunning the socket.
func (d *Daemon) readEvents(ctx context.Context, out chan<- eventBatch) {
	defer close(out)
	src := d.deps.Events
	for {
		evs, err := src.Receive()
		if ctx.Err() != nil {
			return
		}
		b := eventBatch{events: evs, malformed: src.Malformed()}
		switch {
		case errors.Is(err, mptcp.ErrEventsLost):
			b.lost = true
		case errors.Is(err, net.ErrClosed):
			return
		case err != nil:
			d.log.Warn("receive events", "error", err)
			time.Sleep(10 * time.Millisecond) // not a busy loop on a broken socket
			continue
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
	}
}

// lookupFunc starts lookups on their own goroutines, in the daemon's
// namespace, and hands their results to the engine.
func (d *Daemon) lookupFunc(ctx context.Context, ns threadNamespace) func(Query) {
	return func(q Query) {
		go func() {
			ns.enter()
			start := time.Now()
			m, err := d.deps.Mapper.Lookup(ctx, q)
			select {
			case d.lookups <- lookupResult{q, m, time.Since(start), err}:
			case <-ctx.Done():
			}
		}()
	}
}

// stop records the final status and releases the waiters of ask.
func (d *Daemon) stop() {
	d.final = d.status(nil, nil)
	close(d.stopped)
}

// ask runs fn on the engine's goroutine; false if the daemon is not
// running.
func (d *Daemon) ask(fn func(*engine)) bool {
	done := make(chan struct{})
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	select {
	case d.reqs <- func(e *engine) { fn(e); close(done) }:
		<-done
		return true
	case <-d.stopped:
	case <-timeout.C: // not started
	}
	return false
}

// Status returns each connection with its plan and subflows, and the
// counters.
func (d *Daemon) Status() Status {
	var st Status
	ok := d.ask(func(e *engine) {
		conns, err := e.diag.Connections()
		if err != nil {
			d.log.Warn("read connections", "error", err)
		}
		subs, err := e.diag.Subflows()
		if err != nil {
			d.log.Warn("read subflows", "error", err)
		}
		st = d.status(conns, subs)
	})
	if !ok {
		select {
		case <-d.stopped:
			return d.final
		default:
		}
	}
	return st
}

func (d *Daemon) status(conns []ConnInfo, subs []SubflowInfo) Status {
	return Status{Policy: d.cfg.Policy, PathManager: d.prevPM, Started: d.started,
		Connections: d.e.status(conns, subs), Counters: d.e.counters()}
}

// Counters returns the counters.
func (d *Daemon) Counters() Counters {
	var c Counters
	if !d.ask(func(e *engine) { c = e.counters() }) {
		select {
		case <-d.stopped:
			return d.final.Counters
		default:
		}
	}
	return c
}
