package dataplane_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/procnet"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
)

// BenchmarkCompleteChecksums measures what complete-checksums costs: TCP
// goodput (iperf3, cubic, one stream, 5 s a round) from site A's host
// through lispd's ITR to site B, with the RLOC interface's offloads
// ("offload", the reference, to lispd's ETR), with complete-checksums to
// lispd's ETR, and with it to the user-space xTR of TestUserSpaceETR
// (bounded by that xTR, which takes a system call a datagram). Run it
// with -benchtime 1x; Gbit/s is the median of the rounds, ratio the
// median of each round's goodput over the reference's in the same round.
//
//	go test -run '^$' -bench CompleteChecksums -benchtime 1x ./dataplane
func BenchmarkCompleteChecksums(b *testing.B) {
	iperf3 := testenv.RequireTool(b, "iperf3")
	const rounds = 3
	cases := []struct {
		name           string
		complete, user bool
		gbps           []float64
	}{{name: "offload"}, {name: "complete", complete: true}, {name: "complete-user-space", complete: true, user: true}}
	for r := range rounds {
		for i := range cases {
			c := &cases[i]
			b.Run(fmt.Sprintf("round%d/%s", r+1, c.name), func(b *testing.B) {
				o := newInterop(b, c.complete, c.user)
				c.gbps = append(c.gbps, goodput(b, iperf3, o.hostA, o.hostB, "10.2.0.1"))
			})
		}
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ratios := make([]float64, rounds)
			for i := range rounds {
				ratios[i] = c.gbps[i] / cases[0].gbps[i]
			}
			b.ReportMetric(median(c.gbps), "Gbit/s")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

// goodput runs iperf3 for 5 s from one node to a server on another and
// returns what the server received, in Gbit/s.
func goodput(b *testing.B, iperf3 string, from, to *testnet.Node, server string) float64 {
	b.Helper()
	srv := to.Start(b, iperf3, "-s", "-1", "-B", server)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := procnet.TCPListening(fmt.Sprintf("/proc/%d/net", srv.PID()), 5201); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("iperf3's server does not listen: %s", srv.Output())
		}
	}
	out, err := from.Exec(b, iperf3, "-c", server, "-t", "5", "-C", "cubic", "-J")
	if err != nil {
		b.Fatalf("iperf3: %v\n%s", err, out)
	}
	var r struct {
		Error string
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil || r.Error != "" {
		b.Fatalf("iperf3: %v %s", err, r.Error)
	}
	return r.End.SumReceived.BitsPerSecond / 1e9
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
