package lab

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// fidelityPlan has two emulated links, p1 (10 Mbit/s, 2 ms) and p2
// (lossy), and a veth link.
var fidelityPlan = &topo.Plan{Links: []topo.LinkPlan{
	{Name: "p1", Emulated: true, Params: linkemu.Params{Rate: 10e6, Delay: 2 * time.Millisecond}},
	{Name: "p2", Emulated: true, Params: linkemu.Params{Rate: 100e6, Delay: 5 * time.Millisecond,
		Loss: linkemu.Loss{Model: linkemu.Bernoulli, P: 0.01}}},
	{Name: "veth"},
}}

// TestFidelityPathFromCounters finds the link directions that carried
// 20 probes each way (p1 both ways; p2's 3 frames of RLOC probes are not
// the path) and works out the RTT they configure, with the probes'
// serialization, and the rate a flow over p1 a-to-b should reach.
func TestFidelityPathFromCounters(t *testing.T) {
	before := map[string]linkemu.Stats{"p1": {AB: linkemu.DirStats{FramesIn: 100, BytesIn: 100000}}}
	after := map[string]linkemu.Stats{
		"p1": {AB: linkemu.DirStats{FramesIn: 120, BytesIn: 100000 + 20*125},
			BA: linkemu.DirStats{FramesIn: 21, BytesIn: 21 * 125}},
		"p2": {AB: linkemu.DirStats{FramesIn: 3, BytesIn: 300}},
	}
	used := crossed(before, after, func(frames, _ uint64) bool { return frames >= 20 })
	if got := pathName(used); got != "p1 a-to-b, p1 b-to-a" {
		t.Fatalf("path %q, want p1 both ways", got)
	}
	// 2 x (2 ms + 125 bytes at 10 Mbit/s = 100 us).
	if got, want := wantRTT(fidelityPlan, before, after, used), 4200*time.Microsecond; got != want {
		t.Errorf("configured RTT %v, want %v", got, want)
	}
	// 1000 frames of 1514 bytes carried 1412 bytes of payload each.
	before["p1"] = linkemu.Stats{AB: linkemu.DirStats{Delivered: 0}}
	after["p1"] = linkemu.Stats{AB: linkemu.DirStats{FramesIn: 1000, Delivered: 1000, DeliveredBytes: 1514000}}
	data := []linkDir{{"p1", linkemu.AToB}, {"p2", linkemu.AToB}}
	if got, want := wantRate(fidelityPlan, before, after, data, 1412), 10e6*1412/1514; got != want {
		t.Errorf("configured rate %.0f, want %.0f (p1's: p2 delivered nothing)", got, want)
	}
	if lossy(fidelityPlan, used) || !lossy(fidelityPlan, data) {
		t.Errorf("lossy: p1 is not, p2 is")
	}
	if got := pathName(nil); got != "no emulated link" {
		t.Errorf("empty path named %q", got)
	}
}

// TestLatenessOfTheRun takes the p99 of the frames delivered between two
// snapshots only: 1000 early frames 5 ms late do not count, and of the
// run's 200 frames (100 on each link) 3 were between 1 and 2 ms late.
func TestLatenessOfTheRun(t *testing.T) {
	var early, run linkemu.Histogram
	for range 1000 {
		early.Merge(hist(5 * time.Millisecond))
	}
	before := map[string]linkemu.Stats{"p1": {AB: linkemu.DirStats{Lateness: early}}}
	run = early
	for i := range 100 {
		run.Merge(hist(time.Duration(i%50+1) * time.Microsecond))
	}
	other := linkemu.Histogram{}
	for i := range 100 {
		late := 10 * time.Microsecond
		if i < 3 {
			late = 1500 * time.Microsecond
		}
		other.Merge(hist(late))
	}
	after := map[string]linkemu.Stats{"p1": {AB: linkemu.DirStats{Lateness: run}}, "p2": {BA: linkemu.DirStats{Lateness: other}}}
	if got, want := Lateness(before, after), 2*time.Millisecond; got != want {
		t.Errorf("p99 lateness %v, want %v", got, want)
	}
	if got := Lateness(after, after); got != 0 {
		t.Errorf("p99 lateness of nothing %v, want 0", got)
	}
}

// hist is a histogram of one frame late by d.
func hist(d time.Duration) linkemu.Histogram {
	h := linkemu.Histogram{Count: 1, Sum: d, Max: d}
	i := 0
	for i < len(linkemu.LatenessBounds) && d > linkemu.LatenessBounds[i] {
		i++
	}
	h.Counts[i] = 1
	return h
}

// TestMissesNamesWhatMissed: the warning names the paths that missed,
// the lateness over its limit, and the measurement's error.
func TestMissesNamesWhatMissed(t *testing.T) {
	f := &results.Fidelity{Paths: []results.PathFidelity{
		{Name: "a>b via p1 a-to-b", OK: true},
		{Name: "c>d via p2 a-to-b", RTT: 12 * time.Millisecond, RTTWant: 4 * time.Millisecond, RTTBase: 1500 * time.Microsecond, Rate: 9e6, RateWant: 9.3e6},
	}, LatenessP99: time.Millisecond, Error: "e>f: rtt: none of 20 probes answered"}
	got := Misses(f)
	for _, want := range []string{"c>d via p2 a-to-b: RTT 12ms of 4ms configured (1.5ms without the delays), 9.00 of 9.30 Mbit/s",
		"emulator p99 lateness 1ms, limit 500µs", "none of 20 probes"} {
		if !strings.Contains(got, want) {
			t.Errorf("misses %q: no %q", got, want)
		}
	}
	if strings.Contains(got, "a>b") {
		t.Errorf("misses %q names a path that met its configuration", got)
	}
}

// The rate of a flow is the slope of its samples: a burst after a stall
// (in-order delivery filling a hole) at the window's start counts as one
// point, where the bytes between the first and the last sample would
// count it whole. The samples are those a 3.73 Mbit/s path gave, with
// such a burst first.
func TestSlopeWeighsABurstAsOnePoint(t *testing.T) {
	const rate = 3.73e6
	pts := []point{{0.5, 0}, {0.6, 0.1*rate + 0.1*rate}} // the burst: two intervals' bits at once
	for i := 2; i <= 15; i++ {
		x := 0.5 + float64(i)*0.1
		pts = append(pts, point{x, pts[len(pts)-1].y + 0.1*rate})
	}
	first, last := pts[0], pts[len(pts)-1]
	between := (last.y - first.y) / (last.x - first.x)
	got := slope(pts)
	if math.Abs(got-rate)/rate > 0.03 {
		t.Errorf("slope %.0f bit/s, want %.0f within 3 %% (the samples' ends say %.0f)", got, rate, between)
	}
	if math.Abs(between-rate)/rate <= 0.03 {
		t.Errorf("the test's burst is too small to matter: the ends say %.0f", between)
	}
}

// TestLinkRateIsTheBottlenecksDelivery: the rate judged is what the
// slower of the data's links (p1, 10 Mbit/s, beside p2's 100) delivered
// from 0.5 s to the end of sending, in payload: its 1514-byte frames
// carried 1412 bytes each. The snapshots are up to 5 ms off their
// nominal times, as a loaded machine reads them; the receiver's goodput
// (5 % low here, from a stall) does not enter.
func TestLinkRateIsTheBottlenecksDelivery(t *testing.T) {
	const rate, frame = 10e6, 1514.0
	fm := &flowMeasure{goodput: 0.95 * rate * 1412 / frame, mss: 1412, skip: rateSkip, end: rateDuration}
	for i := 0; i <= 22; i++ {
		nominal := time.Duration(i) * 100 * time.Millisecond
		off := time.Duration((i*37)%11-5) * time.Millisecond
		frames := uint64(nominal.Seconds() * rate / 8 / frame)
		fm.snaps = append(fm.snaps, linkSnapshot{at: nominal + off, stats: map[string]linkemu.Stats{
			"p1": {AB: linkemu.DirStats{FramesIn: frames, Delivered: frames, DeliveredBytes: frames * frame}},
			"p2": {AB: linkemu.DirStats{FramesIn: frames, Delivered: frames, DeliveredBytes: frames * frame}},
		}})
	}
	data := []linkDir{{"p2", linkemu.AToB}, {"p1", linkemu.AToB}}
	want := rate * 1412 / frame
	if got := linkRate(fidelityPlan, fm, data); math.Abs(got-want)/want > 0.01 {
		t.Errorf("link rate %.0f bit/s, want %.0f within 1 %%", got, want)
	}
	if d, r, ok := bottleneck(fidelityPlan, data); !ok || d.link != "p1" || r != rate {
		t.Errorf("bottleneck %v at %.0f, want p1 at 10 Mbit/s", d, r)
	}
}

// TestRateWindow: the rate is measured from 0.5 s to 2 s on a short
// path, from 10 round trips for 10 more on a long one (slow start over
// 115 ms is most of 2 s).
func TestRateWindow(t *testing.T) {
	for _, tc := range []struct{ rtt, skip, end time.Duration }{
		{20 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second},
		{115 * time.Millisecond, 1150 * time.Millisecond, 2650 * time.Millisecond},
		{300 * time.Millisecond, 3 * time.Second, 6 * time.Second},
	} {
		if skip, end := rateWindow(tc.rtt); skip != tc.skip || end != tc.end {
			t.Errorf("RTT %v: %v to %v, want %v to %v", tc.rtt, skip, end, tc.skip, tc.end)
		}
	}
}

// TestUnjudgedRate: a single flow is asked to fill a path only when its
// bottleneck's queue holds the path's bandwidth-delay product and it
// loses nothing: p1 (10 Mbit/s, a queue of 25 KB) is judged at an RTT of
// 20 ms (25 KB) but not at 40; p2 loses frames.
func TestUnjudgedRate(t *testing.T) {
	plan := &topo.Plan{Links: []topo.LinkPlan{
		{Name: "p1", Emulated: true, Params: linkemu.Params{Rate: 10e6, QueueBytes: 25000}},
		{Name: "p2", Emulated: true, Params: linkemu.Params{Rate: 10e6, QueueBytes: 1 << 20, Loss: linkemu.Loss{Model: linkemu.Bernoulli, P: 0.01}}},
	}}
	p1 := []linkDir{{"p1", linkemu.AToB}}
	if note := unjudgedRate(plan, p1, 20*time.Millisecond); note != "" {
		t.Errorf("20 ms: %q, want judged", note)
	}
	if note := unjudgedRate(plan, p1, 40*time.Millisecond); !strings.Contains(note, "queue (25 KB) is below the path's bandwidth-delay product (50 KB)") {
		t.Errorf("40 ms: %q", note)
	}
	if note := unjudgedRate(plan, []linkDir{{"p2", linkemu.AToB}}, time.Millisecond); !strings.Contains(note, "loses frames") {
		t.Errorf("lossy: %q", note)
	}
}
