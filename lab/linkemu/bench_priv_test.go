package linkemu

import (
	"cmp"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testnet"
)

// BenchmarkThroughput measures the aggregate rate of MTU-sized frames
// (TCP through a TAP without offloads) at a rate too high to limit and
// no delay, against the same transfer over a plain veth pair in the same
// run, and the p99 lateness. It reports Gbit/s of goodput for both and
// their ratio.
func BenchmarkThroughput(b *testing.B) {
	r := newRig(b, Params{Rate: 100e9, QueueBytes: 4 << 20})
	n := testnet.New(b)
	va, vb := n.Node("va"), n.Node("vb")
	n.Link(va, vb, addrA+"/24", addrB+"/24")
	ref := &rig{a: va, b: vb}
	var emu, veth float64
	for b.Loop() {
		emu += r.iperf3(b, 3)
		veth += ref.iperf3(b, 3)
	}
	s, err := r.link.Stats()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(emu/float64(b.N)/1e9, "emu-Gbit/s")
	b.ReportMetric(veth/float64(b.N)/1e9, "veth-Gbit/s")
	b.ReportMetric(emu/veth, "emu/veth")
	b.ReportMetric(float64(s.AB.Lateness.Quantile(0.99).Microseconds()), "p99-late-us")
	b.Logf("%.2f Gbit/s (veth %.2f), target ≥ 2 Gbit/s: %s", emu/float64(b.N)/1e9, veth/float64(b.N)/1e9, metOrMissed(emu/float64(b.N) >= 2e9))
}

// BenchmarkLateness measures how late frames leave a link with 10 ms of
// delay carrying a 200 Mbit/s TCP flow: the p99 and the maximum.
func BenchmarkLateness(b *testing.B) {
	r := newRig(b, Params{Rate: 200e6, Delay: 10 * time.Millisecond, QueueBytes: 1 << 20})
	for b.Loop() {
		r.iperf3(b, 3)
	}
	s, err := r.link.Stats()
	if err != nil {
		b.Fatal(err)
	}
	var h Histogram
	h.Merge(s.AB.Lateness)
	h.Merge(s.BA.Lateness)
	b.ReportMetric(float64(h.Quantile(0.5).Microseconds()), "p50-late-us")
	b.ReportMetric(float64(h.Quantile(0.99).Microseconds()), "p99-late-us")
	b.ReportMetric(float64(h.Max.Microseconds()), "max-late-us")
	b.Logf("lateness p50 %v, p99 ≤ %v, max %v; target p99 < 500 µs: %s",
		h.Quantile(0.5), h.Quantile(0.99), h.Max, metOrMissed(h.Quantile(0.99) < 500*time.Microsecond))
}

// BenchmarkDelay measures how far the round trip over a link of 2 × 10 ms
// is from 20 ms more than the same link's without delay, measured in the
// same run (the reference leaves out the hosts' stacks and the echo):
// the median's error and the smallest round trip's, against the lab's
// fidelity tolerance (max(0.5 ms, 2 %): 0.5 ms here).
func BenchmarkDelay(b *testing.B) {
	const want = 20 * time.Millisecond
	// One rig: the loops of several emulators, each pinned to the same
	// CPU at real-time priority, would measure each other.
	r := newRig(b, fastLink(0))
	var errs, mins []time.Duration
	for b.Loop() {
		got, added := delayedRTTs(b, r, want/2)
		errs = append(errs, added-want)
		mins = append(mins, got[0]-want)
		for _, d := range []Direction{AToB, BToA} {
			if err := r.link.Update(d, func(p *Params) { p.Delay = 0 }); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(errs)
	slices.Sort(mins)
	b.ReportMetric(float64(errs[len(errs)/2].Microseconds()), "median-err-us")
	b.ReportMetric(float64(errs[len(errs)-1].Microseconds()), "worst-err-us")
	b.ReportMetric(float64(mins[0].Microseconds()), "min-rtt-over-us")
	b.Logf("median RTT over the delays' by %v (worst of %d runs %v), target within 500 µs: %s",
		errs[len(errs)/2], len(errs), errs[len(errs)-1], metOrMissed(errs[len(errs)/2].Abs() <= 500*time.Microsecond))
}

// BenchmarkRate measures a TCP flow's goodput over a link of 50 Mbit/s
// and 5 ms against the most it can carry (the link's rate less the
// headers): the lab's fidelity tolerance is 3 %.
func BenchmarkRate(b *testing.B) {
	const rate = 50e6
	r := newRig(b, Params{Rate: rate, Delay: 5 * time.Millisecond, QueueBytes: 100 << 10})
	var ratios []float64
	for b.Loop() {
		goodput, want := tcpGoodput(b, r, rate)
		ratios = append(ratios, goodput/want)
	}
	slices.Sort(ratios)
	med := ratios[len(ratios)/2]
	b.ReportMetric(med, "goodput/rate")
	b.ReportMetric(ratios[0], "worst-goodput/rate")
	b.Logf("TCP goodput %.3f of the link's (worst of %d runs %.3f), target within 3 %%: %s",
		med, len(ratios), ratios[0], metOrMissed(math.Abs(med-1) <= 0.03))
}

// BenchmarkFrameSpacing measures how far apart a burst's frames arrive
// over a link of 10 Mbit/s against a frame's time at that rate (the
// Theil-Sen slope of the kernel's receive times), as the relative error.
func BenchmarkFrameSpacing(b *testing.B) {
	r := newRig(b, Params{Rate: 10e6, QueueBytes: 1 << 20})
	sp := newSpacer(b, r)
	var errs []float64
	for b.Loop() {
		got, want := sp.frameTime(b, 10e6)
		errs = append(errs, float64(got-want)/float64(want))
	}
	slices.SortFunc(errs, func(x, y float64) int { return cmp.Compare(math.Abs(x), math.Abs(y)) })
	med := errs[len(errs)/2]
	b.ReportMetric(100*med, "median-err-%")
	b.ReportMetric(100*errs[len(errs)-1], "worst-err-%")
	b.Logf("frames %+.2f %% off a frame's time (worst of %d bursts %+.2f %%), target within 5 %%: %s",
		100*med, len(errs), 100*errs[len(errs)-1], metOrMissed(math.Abs(med) <= 0.05))
}

func metOrMissed(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}
