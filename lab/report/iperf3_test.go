package report

import (
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/iperf3"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// An iperf3 flow's goodput is a metric of its own, "goodput iperf3",
// after the saturated flows' "goodput" it checks: iperf3's receiver
// bytes over its seconds. It has no jitter, and a run's goodput (the
// RTT-spread plot's) leaves it out.
func TestIperf3Goodput(t *testing.T) {
	v := Variant{"cc": "cubic"}
	res := &Results{Records: map[string][]traffic.Record{}}
	iperfFlow := traffic.Flow{ID: "iperf3", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "cubic"}
	// Receivers' goodputs: built-in 9, 9.2 Mbit/s; iperf3 8.8, 9.0.
	for i, mbps := range [][2]float64{{9, 8.8}, {9.2, 9.0}} {
		id := "00" + string(rune('1'+i))
		start := t0.Add(time.Duration(i) * time.Minute)
		res.Runs = append(res.Runs, &Run{ID: id, Variant: v, Repetition: i + 1, Started: start, Ended: start.Add(30 * time.Second)})
		recs := []traffic.Record{{Time: start.Add(4 * time.Second), Flow: "builtin", Kind: traffic.KindResult, Role: traffic.Receiver,
			FlowKind: traffic.Saturate, Protocol: traffic.MPTCP, CongestionControl: "cubic", Start: start,
			Completion: 4 * time.Second, BytesReceived: uint64(mbps[0] * 1e6 / 8 * 4), Jitter: 3 * time.Millisecond}}
		out := &iperf3.Output{}
		out.Start.Connected = []iperf3.Connection{{LocalPort: 40000}}
		out.End.SumSent = iperf3.Sum{Seconds: 4, Bytes: uint64(mbps[1] * 1.01e6 / 8 * 4), Retransmits: 7}
		out.End.SumReceived = iperf3.Sum{Seconds: 4, Bytes: uint64(mbps[1] * 1e6 / 8 * 4)}
		recs = append(recs, out.Records(iperfFlow, start.Add(5*time.Second), traffic.MPTCP, 1)...)
		res.Records[id] = recs
	}
	s := Summarize(res)
	var names []string
	for _, m := range s.Metrics {
		names = append(names, m.Name)
	}
	if got, want := strings.Join(names, ", "), "goodput, goodput iperf3, jitter saturate"; got != want {
		t.Fatalf("metrics %q, want %q", got, want)
	}
	for i, median := range []float64{9.1, 8.9} {
		if r := s.Metrics[i].Rows[0]; r.N != 2 || !near(r.Median, median) {
			t.Errorf("%s: %+v, want 2 samples, median %g", s.Metrics[i].Name, r.Stats, median)
		}
	}
	if g := runGoodput(results.Flows(res.Records["001"])); !near(g, 9e6) {
		t.Errorf("the run's goodput is %g bit/s, want the saturated flow's 9e6", g)
	}
	var text strings.Builder
	if err := WriteText(&text, res, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "goodput iperf3 (Mbit/s)") {
		t.Errorf("the table has no iperf3 goodput:\n%s", text.String())
	}
}
