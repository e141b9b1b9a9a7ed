package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// The fidelity check's tolerances: a path's idle RTT may miss
// the configured one by RTTTolerance or RTTToleranceShare of it, whichever
// is larger; its single-flow goodput the configured rate's payload by
// RateTolerance; the emulator's p99 lateness over the run may not pass
// LatenessLimit (the benchmark's target).
const (
	RTTTolerance      = 500 * time.Microsecond
	RTTToleranceShare = 0.02
	RateTolerance     = 0.03
	LatenessLimit     = 500 * time.Microsecond
)

// How the paths are measured.
const (
	// fidelityProbes UDP echoes measure a path's RTT, one at a time,
	// fidelityProbeGap apart so that each finds the queues empty.
	fidelityProbes   = 20
	fidelityProbeGap = 5 * time.Millisecond
	probeTimeout     = time.Second
	// The single flow saturates the path for rateDuration; the goodput
	// counts from rateSkip on, after slow start. On a long path both
	// are longer (rateWindow): slow start takes more round trips.
	rateDuration = 2 * time.Second
	rateSkip     = 500 * time.Millisecond
	// fidelityPort serves the probes (UDP) and the single flow (TCP):
	// below the warm-up's and the flows' ports.
	fidelityPort = 4999
)

// linkDir is one direction of an emulated link.
type linkDir struct {
	link string
	dir  linkemu.Direction
}

func (d linkDir) String() string { return d.link + " " + d.dir.String() }

// measurePaths measures the emulated path of each pair of hosts, one
// pair after the other, in a lab that is up and whose map-caches hold
// both hosts' sites (a first exchange between them is lost to the
// misses): the idle RTT from the first host to the second and back, and
// the goodput of one TCP flow with cubic from the first to the second.
// It compares them with the plan's configuration of the links the probes
// and the flow really crossed: the xTRs choose among RLOCs and ELPs, so
// the routed path of the underlay is not necessarily the one used; the
// links' counters say which was; a pair whose probes crossed no
// emulated link has no path in the result. The Fidelity's LatenessP99 is
// left for Lateness to fill in after the run.
func measurePaths(ctx context.Context, plan *topo.Plan, links LinkControl, pairs []ends) *results.Fidelity {
	fid := &results.Fidelity{OK: true, Paths: []results.PathFidelity{}}
	var errs []error
	for _, p := range pairs {
		pf, err := measurePath(ctx, plan, links, p)
		if errors.Is(err, errNotEmulated) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		fid.Paths = append(fid.Paths, pf)
		fid.OK = fid.OK && pf.OK
	}
	if err := errors.Join(errs...); err != nil {
		fid.OK, fid.Error = false, err.Error()
	}
	return fid
}

// errNotEmulated says that a pair's probes crossed no emulated link:
// there is nothing to measure against.
var errNotEmulated = errors.New("no emulated link on the path")

// measurePath measures the path from one host to another; an error
// leaves the path not OK with what it measured so far.
func measurePath(ctx context.Context, plan *topo.Plan, links LinkControl, e ends) (results.PathFidelity, error) {
	pf := results.PathFidelity{Name: e.String()}
	rtt, _, used, s0, s1, err := probeLinks(ctx, plan, links, e)
	if err != nil {
		return pf, fmt.Errorf("rtt: %w", err)
	}
	if len(used) == 0 {
		return pf, errNotEmulated
	}
	pf.RTT = rtt
	pf.RTTWant = wantRTT(plan, s0, s1, used)
	if pf.RTTBase, err = baselineRTT(ctx, plan, links, e, used); err != nil {
		pf.Name += " via " + pathName(used)
		return pf, fmt.Errorf("rtt without the delays: %w", err)
	}

	flow, err := singleFlow(ctx, plan, links, e, rtt)
	if err != nil {
		pf.Name += " via " + pathName(used)
		return pf, fmt.Errorf("rate: %w", err)
	}
	// The flow's data crossed the links that carried most of its
	// bytes (the ACKs, the other way, are a few percent of them).
	first, last := flow.snaps[0].stats, flow.snaps[len(flow.snaps)-1].stats
	total := flow.goodput * (flow.end - flow.skip).Seconds() / 8
	data := crossed(first, last, func(_, bytes uint64) bool { return float64(bytes) >= total/2 })
	pf.Name += " via " + pathName(used)
	if !subset(data, used) {
		// The flow took other links than the echoes (the xTRs hash a
		// flow's ports): its rate is theirs.
		pf.Name += "; its data via " + pathName(data)
	}
	pf.Goodput = flow.goodput
	pf.RateWant = wantRate(plan, first, last, data, flow.mss)
	pf.Rate = linkRate(plan, flow, data)
	tol := max(RTTTolerance, time.Duration(RTTToleranceShare*float64(pf.RTTWant)))
	// The links must add their delays to what the path costs without
	// them (the baseline, which holds the serialization too).
	rttOK := (pf.RTT - pf.RTTBase - delays(plan, used)).Abs() <= tol
	// A single flow cannot be asked to fill a lossy path, nor one whose
	// bottleneck queue holds less than its bandwidth-delay product (after
	// a loss its window falls below the pipe, and on a long path it takes
	// seconds to grow back): there the rate is recorded, and only the RTT
	// decides.
	pf.RateNote = unjudgedRate(plan, data, pf.RTT)
	rateOK := pf.RateNote != "" || math.Abs(pf.Rate-pf.RateWant) <= RateTolerance*pf.RateWant
	pf.OK = rttOK && rateOK && len(data) > 0
	return pf, nil
}

// unjudgedRate says why a single flow's rate on the data's links is not
// judged, or "" when it is.
func unjudgedRate(plan *topo.Plan, data []linkDir, rtt time.Duration) string {
	if lossy(plan, data) {
		return "not judged: the path loses frames"
	}
	d, rate, ok := bottleneck(plan, data)
	if !ok {
		return ""
	}
	p, _ := linkParams(plan, d.link)
	if bdp := rate / 8 * rtt.Seconds(); float64(p.QueueBytes) < bdp {
		return fmt.Sprintf("not judged: %s's queue (%d KB) is below the path's bandwidth-delay product (%.0f KB)", d, p.QueueBytes/1000, bdp/1000)
	}
	return ""
}

// crossed returns the link directions whose frames-in and bytes-in grew
// between two snapshots of the counters in a way keep accepts.
func crossed(before, after map[string]linkemu.Stats, keep func(frames, bytes uint64) bool) []linkDir {
	var out []linkDir
	for name, a := range after {
		b := before[name]
		for _, d := range []linkemu.Direction{linkemu.AToB, linkemu.BToA} {
			da, db := a.Dir(d), b.Dir(d)
			if da.FramesIn > db.FramesIn && keep(da.FramesIn-db.FramesIn, da.BytesIn-db.BytesIn) {
				out = append(out, linkDir{name, d})
			}
		}
	}
	slices.SortFunc(out, func(x, y linkDir) int { return strings.Compare(x.String(), y.String()) })
	return out
}

// subset reports whether every link direction of a is in b.
func subset(a, b []linkDir) bool {
	for _, d := range a {
		if !slices.Contains(b, d) {
			return false
		}
	}
	return true
}

// pathName is "p1 a-to-b, p1 b-to-a"; "no emulated link" when empty.
func pathName(ds []linkDir) string {
	if len(ds) == 0 {
		return "no emulated link"
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}

// linkParams returns the plan's configuration of an emulated link.
func linkParams(plan *topo.Plan, name string) (linkemu.Params, bool) {
	for _, l := range plan.Links {
		if l.Name == name && l.Emulated {
			return l.Params, true
		}
	}
	return linkemu.Params{}, false
}

// baselineRTT measures the path's RTT again with the delays of its link
// directions set to zero, and puts them back: what the hosts' stacks, the
// TAP crossings, the xTRs' data planes and the serialization cost, which
// the emulated delays come on top of (0.5 to 1.5 ms on the demo's path
// on this machine, more than the tolerance). It is the fastest of the
// probes: the path's own cost, which a loaded machine only adds to (the
// median of a burst of late wake-ups, 2.5 ms where the path costs 0.5,
// flagged right paths as faster than their delays). The probes must
// cross the same link directions as before (they go from the same port).
func baselineRTT(ctx context.Context, plan *topo.Plan, links LinkControl, e ends, used []linkDir) (base time.Duration, err error) {
	var zeroed []linkDir
	defer func() {
		for _, d := range zeroed {
			p, _ := linkParams(plan, d.link)
			err = errors.Join(err, links.Apply(delayEvent(d, p.Delay)))
		}
	}()
	for _, d := range used {
		if p, ok := linkParams(plan, d.link); !ok || p.Delay == 0 {
			continue
		}
		if err := links.Apply(delayEvent(d, 0)); err != nil {
			return 0, err
		}
		zeroed = append(zeroed, d)
	}
	_, fastest, got, _, _, err := probeLinks(ctx, plan, links, e)
	if err != nil {
		return 0, err
	}
	if !slices.Equal(got, used) {
		return 0, fmt.Errorf("the probes crossed %s, before %s", pathName(got), pathName(used))
	}
	return fastest, nil
}

// probeLinks measures the RTT from one host to the other (probeRTT: the
// median and the fastest) and the link directions the probes crossed:
// every answered probe crossed each link of the way there and back. It
// returns the links' counters before and after too.
func probeLinks(ctx context.Context, plan *topo.Plan, links LinkControl, e ends) (
	rtt, fastest time.Duration, used []linkDir, before, after map[string]linkemu.Stats, err error) {
	if before, err = links.Stats(); err != nil {
		return
	}
	rtt, fastest, answered, err := probeRTT(ctx, plan, e)
	if err != nil {
		return
	}
	if after, err = links.Stats(); err != nil {
		return
	}
	used = crossed(before, after, func(d, _ uint64) bool { return d >= uint64(answered) })
	return
}

// delayEvent sets one link direction's delay.
func delayEvent(d linkDir, delay time.Duration) topo.Event {
	return topo.Event{Link: d.link, Action: topo.ActionSet, Direction: d.dir.String(), Delay: delay.String()}
}

// delays is the sum of the configured delays of the link directions.
func delays(plan *topo.Plan, ds []linkDir) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if p, ok := linkParams(plan, d.link); ok {
			sum += p.Delay
		}
	}
	return sum
}

// wantRTT is the configured RTT over the link directions used: each
// one's delay and the serialization of the probes' frames, whose mean
// size the counters give (it includes the tunnels' headers).
func wantRTT(plan *topo.Plan, before, after map[string]linkemu.Stats, used []linkDir) time.Duration {
	var want time.Duration
	for _, d := range used {
		p, ok := linkParams(plan, d.link)
		if !ok {
			continue
		}
		want += p.Delay
		a, b := after[d.link], before[d.link]
		da, db := a.Dir(d.dir), b.Dir(d.dir)
		if p.Rate > 0 {
			frame := float64(da.BytesIn-db.BytesIn) / float64(da.FramesIn-db.FramesIn)
			want += time.Duration(frame * 8 / p.Rate * 1e9)
		}
	}
	return want
}

// bottleneck is the data's link direction with the smallest configured
// rate, false when none has a rate.
func bottleneck(plan *topo.Plan, data []linkDir) (linkDir, float64, bool) {
	var best linkDir
	rate := 0.0
	for _, d := range data {
		if p, ok := linkParams(plan, d.link); ok && p.Rate > 0 && (rate == 0 || p.Rate < rate) {
			best, rate = d, p.Rate
		}
	}
	return best, rate, rate > 0
}

// payloadShare is the share of a link direction's delivered bytes that
// was a flow's payload: the MSS over the mean frame it delivered between
// two snapshots (which counts the tunnels' headers where there are some);
// 1 when it delivered nothing.
func payloadShare(before, after map[string]linkemu.Stats, d linkDir, mss int) float64 {
	a, b := after[d.link], before[d.link]
	da, db := a.Dir(d.dir), b.Dir(d.dir)
	if da.Delivered == db.Delivered {
		return 1
	}
	frame := float64(da.DeliveredBytes-db.DeliveredBytes) / float64(da.Delivered-db.Delivered)
	return min(1, float64(mss)/frame)
}

// wantRate is the goodput a single flow should reach on the data's
// links: the bottleneck's rate times the payload's share of its frames.
func wantRate(plan *topo.Plan, before, after map[string]linkemu.Stats, data []linkDir, mss int) float64 {
	d, rate, ok := bottleneck(plan, data)
	if !ok {
		return 0
	}
	return rate * payloadShare(before, after, d, mss)
}

// linkRate is the payload rate the data's bottleneck delivered while the
// flow kept it busy: the slope of its delivered bytes, sampled every
// linkSampleInterval from the end of slow start to the end of sending (rateWindow), times the
// payload's share of its frames. The link's counters, not the
// receiver's bytes: TCP hands the application its bytes in order, so
// each drop-tail loss stalls the receiver for a round trip and then
// bursts, which moved the receiver's rate over 1.5 s by 5 % either way
// on a link that delivered its 4 Mbit/s to within 1 %.
func linkRate(plan *topo.Plan, flow *flowMeasure, data []linkDir) float64 {
	d, _, ok := bottleneck(plan, data)
	if !ok {
		return flow.goodput
	}
	var pts []point
	var first, last map[string]linkemu.Stats
	for _, sn := range flow.snaps {
		if sn.at < flow.skip || sn.at > flow.end {
			continue
		}
		if first == nil {
			first = sn.stats
		}
		last = sn.stats
		st := sn.stats[d.link]
		pts = append(pts, point{sn.at.Seconds(), float64(st.Dir(d.dir).DeliveredBytes) * 8})
	}
	if len(pts) < 5 {
		return flow.goodput
	}
	return slope(pts) * payloadShare(first, last, d, flow.mss)
}

// lossy reports whether any of the link directions loses frames.
func lossy(plan *topo.Plan, ds []linkDir) bool {
	for _, d := range ds {
		if p, ok := linkParams(plan, d.link); ok && p.Loss.Rate() > 0 {
			return true
		}
	}
	return false
}

// probeRTT sends fidelityProbes UDP echoes from one host to an echo in
// the other, one at a time, and returns the median and the smallest RTT
// of those answered and their number.
func probeRTT(ctx context.Context, plan *topo.Plan, e ends) (median, fastest time.Duration, answered int, err error) {
	addr := e.server(plan, fidelityPort)
	var echo net.PacketConn
	err = (&netns.NS{Name: plan.Node(e.to).Namespace}).Do(func() (err error) {
		echo, err = (&net.ListenConfig{}).ListenPacket(ctx, "udp4", addr)
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, peer, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(buf[:n], peer)
		}
	}()
	var c net.Conn
	err = (&netns.NS{Name: plan.Node(e.from).Namespace}).Do(func() (err error) {
		// From a fixed port, so that the xTRs choose the same path for
		// every measurement.
		local := &net.UDPAddr{Port: fidelityPort}
		if a := e.client(plan); a.IsValid() {
			local.IP = a.AsSlice()
		}
		d := net.Dialer{LocalAddr: local}
		c, err = d.DialContext(ctx, "udp4", addr)
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	var rtts []time.Duration
	buf := make([]byte, 64)
	for i := range fidelityProbes {
		if ctx.Err() != nil {
			return 0, 0, 0, ctx.Err()
		}
		msg := fmt.Appendf(nil, "amptcp-fidelity %d", i)
		sent := time.Now()
		if _, err := c.Write(msg); err != nil {
			return 0, 0, 0, err
		}
		c.SetReadDeadline(sent.Add(probeTimeout))
		for {
			n, err := c.Read(buf)
			if err != nil {
				break // lost: the next probe
			}
			if string(buf[:n]) == string(msg) {
				rtts = append(rtts, time.Since(sent))
				break
			}
		}
		time.Sleep(fidelityProbeGap)
	}
	if len(rtts) == 0 {
		return 0, 0, 0, fmt.Errorf("none of %d probes to %s answered", fidelityProbes, addr)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], rtts[0], len(rtts), nil
}

// flowMeasure is what the single flow of a path measured: the
// receiver's goodput (the slope of its bytes from skip to the end of
// sending), the sender's MSS, and snapshots of the links' counters from
// the flow's start to its end.
type flowMeasure struct {
	goodput   float64
	mss       int
	snaps     []linkSnapshot
	skip, end time.Duration
}

// rateWindow is when a single flow's rate is measured on a path of that
// RTT: from rateSkip, or 10 round trips (slow start on a long fat path),
// for 1.5 s or 10 round trips more.
func rateWindow(rtt time.Duration) (skip, end time.Duration) {
	skip = max(rateSkip, 10*rtt)
	return skip, skip + max(rateDuration-rateSkip, 10*rtt)
}

// linkSnapshot is the links' counters at a time since a flow started.
type linkSnapshot struct {
	at    time.Duration
	stats map[string]linkemu.Stats
}

// singleFlow runs one saturated TCP flow with cubic from one host to the
// other, on a path of that RTT, reading the links' counters every
// linkSampleInterval meanwhile.
func singleFlow(ctx context.Context, plan *topo.Plan, links LinkControl, e ends, rtt time.Duration) (*flowMeasure, error) {
	addr := e.server(plan, fidelityPort)
	fm := &flowMeasure{}
	fm.skip, fm.end = rateWindow(rtt)
	f := traffic.Flow{ID: "fidelity", Kind: traffic.Saturate, Protocol: traffic.TCP,
		CongestionControl: "cubic", Duration: fm.end, Local: e.client(plan)}
	var snapErr error
	res, recs, err := oneFlow(ctx, plan, e, f, addr, addr, func(start time.Time) func() {
		snapped, stop := make(chan error, 1), make(chan struct{})
		go func() { snapped <- fm.snapshots(links, start, stop) }()
		return func() {
			close(stop)
			snapErr = <-snapped
		}
	})
	if err == nil && snapErr != nil {
		err = fmt.Errorf("read the links' counters: %w", snapErr)
	}
	if err != nil {
		return nil, err
	}
	var pts []point
	for _, r := range recs {
		switch since := r.Time.Sub(res.Start); {
		case r.Kind == traffic.KindReceiver && since >= fm.skip && since <= fm.end:
			pts = append(pts, point{since.Seconds(), float64(r.BytesReceived) * 8})
		case r.Kind == traffic.KindSubflow:
			fm.mss = max(fm.mss, int(r.MSS))
		}
	}
	if len(pts) < 5 || fm.mss == 0 || len(fm.snaps) < 2 {
		return nil, fmt.Errorf("the flow left %d samples between %v and %v (%d records, %d snapshots of the links)",
			len(pts), fm.skip, fm.end, len(recs), len(fm.snaps))
	}
	fm.goodput = slope(pts)
	return fm, nil
}

// snapshots reads the links' counters every linkSampleInterval, and once
// more when stop closes; each is timed from start, at the middle of its
// round trip to the link daemon.
func (fm *flowMeasure) snapshots(links LinkControl, start time.Time, stop <-chan struct{}) error {
	tick := time.NewTicker(linkSampleInterval)
	defer tick.Stop()
	snap := func() error {
		t0 := time.Now()
		st, err := links.Stats()
		if err != nil {
			return err
		}
		at := t0.Add(time.Since(t0) / 2).Sub(start)
		fm.snaps = append(fm.snaps, linkSnapshot{at: at, stats: st})
		return nil
	}
	if err := snap(); err != nil {
		return err
	}
	for {
		select {
		case <-tick.C:
			if err := snap(); err != nil {
				return err
			}
		case <-stop:
			return snap()
		}
	}
}

type point struct{ x, y float64 }

// slope is the least-squares slope of the points: the bits received over
// time. TCP delivers to the application in order, so a loss shows as a
// stall and then a burst when the hole is filled; a rate taken between
// two samples counts such a burst whole when the window starts or ends
// after its stall (5 % too high here), where the slope over all the
// samples of the window weighs it as one point among many.
func slope(pts []point) float64 {
	var sx, sy float64
	for _, p := range pts {
		sx += p.x
		sy += p.y
	}
	n := float64(len(pts))
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for _, p := range pts {
		sxy += (p.x - mx) * (p.y - my)
		sxx += (p.x - mx) * (p.x - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// Lateness is the p99 of the emulator's lateness, over every emulated
// link and direction, between two snapshots of the counters. A
// difference of histograms has no maximum of its own: the later
// snapshot's stands in for it, an upper bound.
func Lateness(before, after map[string]linkemu.Stats) time.Duration {
	var h linkemu.Histogram
	for name, a := range after {
		b := before[name]
		for _, d := range []linkemu.Direction{linkemu.AToB, linkemu.BToA} {
			ha, hb := &a.Dir(d).Lateness, &b.Dir(d).Lateness
			diff := linkemu.Histogram{Count: ha.Count - hb.Count, Sum: ha.Sum - hb.Sum, Max: ha.Max}
			for i := range ha.Counts {
				diff.Counts[i] = ha.Counts[i] - hb.Counts[i]
			}
			h.Merge(diff)
		}
	}
	return h.Quantile(0.99)
}

// Misses says what a fidelity missed, for a warning: the paths that
// missed, the lateness if it passed its limit, the measurement's error.
func Misses(f *results.Fidelity) string {
	var out []string
	for _, p := range f.Paths {
		if !p.OK {
			out = append(out, p.String())
		}
	}
	if f.LatenessP99 > LatenessLimit {
		out = append(out, fmt.Sprintf("emulator p99 lateness %v, limit %v", f.LatenessP99, LatenessLimit))
	}
	if f.Error != "" {
		out = append(out, f.Error)
	}
	return strings.Join(out, "; ")
}

// fidelityRun measures a run's fidelity: the paths before its flows,
// the lateness during them.
type fidelityRun struct {
	links  LinkControl
	before map[string]linkemu.Stats
	fid    *results.Fidelity
}

// beforeFidelity, when set (by a test), is called with the lab's link
// control before its paths are measured.
var beforeFidelity func(LinkControl)

// startFidelity warms the map-caches between the flows' hosts and
// measures the path of each pair of them (the sender's host first); nil
// when the lab has no emulated link (nothing to measure).
func startFidelity(ctx context.Context, plan *topo.Plan, opts Options, flows []scenario.Planned) *fidelityRun {
	links, err := OpenLinks(plan.Name, opts)
	if errors.Is(err, ErrNoEmulatedLinks) {
		return nil
	}
	fr := &fidelityRun{links: links, fid: &results.Fidelity{Paths: []results.PathFidelity{}}}
	if err == nil {
		err = warm(ctx, plan, flows)
	}
	if err == nil && beforeFidelity != nil {
		beforeFidelity(links)
	}
	if err != nil {
		fr.fid.Error = err.Error()
		return fr
	}
	// Each pair in the direction of its data: a download's from its
	// server to its client.
	var pairs []ends
	for _, f := range flows {
		if f.Kind == scenario.KindBackground && len(flows) > 1 {
			continue // UDP noise: the stream flows' paths are the experiment's
		}
		if p := flowEnds(f, true); !slices.Contains(pairs, p) {
			pairs = append(pairs, p)
		}
	}
	fr.fid = measurePaths(ctx, plan, links, pairs)
	if fr.before, err = links.Stats(); err != nil {
		fr.fid.OK, fr.fid.Error = false, err.Error()
	}
	return fr
}

// finish records the lateness since the paths were measured; a nil
// fidelityRun measured nothing.
func (fr *fidelityRun) finish() *results.Fidelity {
	if fr == nil {
		return nil
	}
	if fr.before != nil {
		after, err := fr.links.Stats()
		if err != nil {
			fr.fid.OK, fr.fid.Error = false, err.Error()
			return fr.fid
		}
		fr.fid.LatenessP99 = Lateness(fr.before, after)
		fr.fid.OK = fr.fid.OK && fr.fid.LatenessP99 <= LatenessLimit
	}
	return fr.fid
}
