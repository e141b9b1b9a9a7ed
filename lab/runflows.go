package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// warmTimeout bounds the warm-up exchange of a pair of hosts: the
// routers hold its first packets while they resolve the sites (miss:
// hold), a map-resolver's round trip or two; a mapping system that does
// not answer costs retransmission timeouts (1 s, then 2 s).
const warmTimeout = 20 * time.Second

// sinkLinger is how long a background flow's sink waits for its last
// datagram or end marker after the sender is done.
const sinkLinger = 2 * time.Second

// runFlows runs a run's flows in a lab that is up, with the variant's
// events at their times, and notes the events in e.
func runFlows(ctx context.Context, s *scenario.Scenario, run scenario.Run, plan *topo.Plan, opts RunOptions, rec traffic.Recorder, e *results.Run) error {
	flows := s.Plan(run.Variant)
	events := s.Events(run.Variant)
	for _, ev := range events {
		e.Events = append(e.Events, results.Event{At: ev.At.Duration, Link: ev.Link, Action: string(ev.Action), Detail: ev.Detail()})
	}
	calibrated := s.CalibratedEvents()
	co, control := opts.observer().(ControlObserver)
	links := &labEvents{plan: plan}
	if len(events) > 0 || len(calibrated) > 0 || control {
		open := opts.Links
		if open == nil {
			open = func(name string, o Options) (EventApplier, error) { return OpenLinks(name, o) }
		}
		lc, err := open(plan.Name, opts.Lab)
		switch {
		case err == nil:
			links.links = lc
		case len(events) > 0:
			e.EventsNote = "not applied: " + err.Error()
		}
	}
	for _, ev := range calibrated {
		if err := links.Apply(ev); err != nil {
			return fmt.Errorf("calibrated %s: %w", ev.Link, err)
		}
	}
	if err := warm(ctx, plan, flows); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout.Duration)
	defer cancel()
	servers, err := startServers(ctx, plan, flows, rec)
	if err != nil {
		return err
	}
	t0 := time.Now()
	e.FlowsStart = t0
	opts.observer().FlowsStarted(t0)
	flowsDone := make(chan struct{})
	eventsDone := make(chan struct{})
	go func() {
		defer close(eventsDone)
		applyEvents(ctx, links, events, t0, flowsDone, e.Events, opts.observer())
	}()
	var manual *runControl
	if control && links.links != nil {
		manual = &runControl{links: links, t0: t0, obs: opts.observer()}
		co.ControlAvailable(manual.apply)
	}
	stopSampling := startLinkSampling(plan, opts, e)
	var wg sync.WaitGroup
	errs := make([]error, len(flows))
	for i, f := range flows {
		wg.Go(func() { errs[i] = runFlow(ctx, plan, f, t0, rec) })
	}
	wg.Wait()
	if manual != nil {
		co.ControlAvailable(nil)
		e.Events = append(e.Events, manual.done()...)
	}
	stopSampling()
	close(flowsDone)
	<-eventsDone
	servers.stop()
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		errs = append(errs, fmt.Errorf("the flows took longer than the timeout, %v", s.Timeout.Duration))
	}
	return errors.Join(errs...)
}

// applyEvents applies each event at its time from t0 until the flows
// are done, noting when it really was applied, and tells obs.
func applyEvents(ctx context.Context, links EventApplier, events []topo.Event, t0 time.Time, flowsDone <-chan struct{}, out []results.Event, obs Observer) {
	for i, ev := range events {
		timer := time.NewTimer(time.Until(t0.Add(ev.At.Duration)))
		select {
		case <-timer.C:
		case <-flowsDone:
			timer.Stop()
			return
		case <-ctx.Done():
			timer.Stop()
			return
		}
		err := links.Apply(ev)
		if errors.Is(err, errNoLinkControl) {
			continue // not applied: EventsNote says why
		}
		out[i].Applied = time.Now()
		out[i].AppliedAfter = max(out[i].Applied.Sub(t0), 1)
		if err != nil {
			out[i].Error = err.Error()
		}
		obs.EventApplied(out[i])
	}
}

// runFlow runs one planned flow from its client: at its time, each of
// its traffic flows one after the other; the first failure ends it.
func runFlow(ctx context.Context, plan *topo.Plan, p scenario.Planned, t0 time.Time, rec traffic.Recorder) error {
	select {
	case <-time.After(time.Until(t0.Add(p.At.Duration))):
	case <-ctx.Done():
		return fmt.Errorf("flow %s: %w", p.Name, ctx.Err())
	}
	if p.Kind == scenario.KindIperf3 {
		return runIperf3(ctx, plan, p, rec)
	}
	ns := &netns.NS{Name: plan.Node(p.From).Namespace}
	e := flowEnds(p, false)
	addr := e.server(plan, p.Port)
	for _, f := range p.Traffic {
		f.Local = e.client(plan)
		var run func(context.Context, traffic.Recorder) (traffic.Result, error)
		err := ns.Do(func() error {
			if f.Kind == traffic.Background {
				snd, err := traffic.DialUDP(f, addr)
				if err == nil {
					run = snd.Run
				}
				return err
			}
			dialCtx, cancel := ctx, func() {}
			if p.ConnectTimeout != nil {
				dialCtx, cancel = context.WithTimeout(ctx, p.ConnectTimeout.Duration)
			}
			defer cancel()
			start := time.Now()
			st, err := traffic.Dial(dialCtx, f, addr)
			if err != nil && p.ConnectTimeout != nil && ctx.Err() == nil {
				// Not connecting is what the flow measures: a result
				// that says so, and the run goes on.
				rec.Record(traffic.Record{Time: time.Now(), Flow: f.ID, Kind: traffic.KindResult, Role: traffic.Sender,
					FlowKind: f.Kind, Protocol: f.Protocol, CongestionControl: f.CongestionControl, Start: start,
					Error: fmt.Sprintf("%s within %v: %v", results.NotConnected, p.ConnectTimeout.Duration, err)})
				run = nil
				return nil
			}
			if err == nil {
				run = st.Run
			}
			return err
		})
		if err == nil && run != nil {
			_, err = run(ctx, rec)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// servers are the servers of a run's flows.
type servers struct {
	stream []*traffic.Server
	sinks  []*traffic.UDPSink
	wg     sync.WaitGroup
}

// startServers starts each flow's server in its host, on the wildcard
// address (an MPTCP join may come to any of the host's addresses).
func startServers(ctx context.Context, plan *topo.Plan, flows []scenario.Planned, rec traffic.Recorder) (*servers, error) {
	sv := &servers{}
	for _, p := range flows {
		if p.Kind == scenario.KindIperf3 {
			continue // runIperf3 starts iperf3's own server at the flow's time
		}
		addr := "0.0.0.0:" + strconv.Itoa(p.Port)
		ns := &netns.NS{Name: plan.Node(p.To).Namespace}
		err := ns.Do(func() error {
			if p.Kind == scenario.KindBackground {
				sink, err := traffic.ListenUDP(addr, 0)
				if err == nil {
					sv.sinks = append(sv.sinks, sink)
					sv.wg.Go(func() { sink.Serve(ctx, rec) })
				}
				return err
			}
			srv, err := traffic.Listen(addr, traffic.ListenOptions{Protocol: p.Traffic[0].Protocol})
			if err == nil {
				sv.stream = append(sv.stream, srv)
				sv.wg.Go(func() { srv.Serve(ctx, rec) })
			}
			return err
		})
		if err != nil {
			sv.stop()
			return nil, fmt.Errorf("flow %s: server in %s: %w", p.Name, p.To, err)
		}
	}
	return sv, nil
}

// stop closes the servers once their flows have ended, giving each sink
// a moment for its last datagram.
func (sv *servers) stop() {
	for _, s := range sv.stream {
		s.Close()
	}
	for deadline := time.Now().Add(sinkLinger); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		done := true
		for _, s := range sv.sinks {
			done = done && len(s.Results()) > 0
		}
		if done {
			break
		}
	}
	for _, s := range sv.sinks {
		s.Close()
	}
	sv.wg.Wait()
}

// warmConnections is how many connections warm a pair of hosts: each
// from another source port, consecutive from warmPortBase, so that their
// port sums fall on every path of a port-sum xTR (up to 8) and the flows
// put on each path find its RTRs' caches warm too. (Ports the kernel
// chose were all even, and so were their sums with port 5000: every
// warm-up took the first path, and a flow of an odd sum found the other
// path's RTR cold and its first SYN dropped.)
// Each pair's exchanges take the next block of ports, the blocks going
// round warmBlocks: a block used again within a minute would find its
// ports in TIME_WAIT.
const (
	warmConnections = 8
	warmPortBase    = 4100
	warmBlocks      = 100
)

// warmBlock counts the blocks of ports taken.
var warmBlock atomic.Uint32

// nextWarmPorts is the first of the next block of warmConnections ports:
// a block is not used again until the others were, so that the ports of
// a warm-up are not those of the last one, still in TIME_WAIT.
func nextWarmPorts() int {
	return warmPortBase + int(warmBlock.Add(1)%warmBlocks)*warmConnections
}

// warm opens plain TCP connections between the two hosts of each flow
// (from the client's address of the flow) and exchanges a byte on each,
// so that the xTRs and RTRs hold both
// sites' mappings before the flows start: the flows then measure the
// paths in their steady state, not the resolution of their first
// packets (which the routers hold while they resolve, so that nothing is
// lost either way: docs/lab.md).
func warm(ctx context.Context, plan *topo.Plan, flows []scenario.Planned) error {
	done := map[ends]bool{}
	for _, f := range flows {
		e := flowEnds(f, false)
		if done[e] {
			continue
		}
		port := nextWarmPorts()
		done[e] = true
		addr := e.server(plan, scenario.WarmupPort)
		if err := warmPair(ctx, plan.Node(f.From).Namespace, plan.Node(f.To).Namespace, e.client(plan), port, addr); err != nil {
			return fmt.Errorf("%s to %s: %w", f.From, f.To, err)
		}
	}
	return nil
}

// warmPair warms the paths from a client's namespace (from its address
// local, any when not valid) to a server's address in another:
// warmConnections exchanges from consecutive ports from port.
func warmPair(ctx context.Context, clientNS, serverNS string, local netip.Addr, port int, addr string) error {
	for i := range warmConnections {
		from := &net.TCPAddr{Port: port + i}
		if local.IsValid() {
			from.IP = local.AsSlice()
		}
		if err := exchange(ctx, clientNS, serverNS, from, addr); err != nil {
			return err
		}
	}
	return nil
}

// exchange sends a byte from a client in one namespace to a server in
// another, which sends it back.
func exchange(ctx context.Context, clientNS, serverNS string, from *net.TCPAddr, addr string) error {
	var ln net.Listener
	err := (&netns.NS{Name: serverNS}).Do(func() (err error) {
		ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return err
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(warmTimeout))
		var b [1]byte
		if _, err = io.ReadFull(c, b[:]); err == nil {
			_, err = c.Write(b[:])
		}
		served <- err
	}()
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	var c net.Conn
	err = (&netns.NS{Name: clientNS}).Do(func() (err error) {
		c, err = (&net.Dialer{LocalAddr: from}).DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(warmTimeout))
	var b [1]byte
	if _, err := c.Write([]byte{'w'}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	return <-served
}
