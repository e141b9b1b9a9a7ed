package linkemu

import (
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
}
