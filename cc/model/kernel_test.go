//go:build cgo

package model

import (
	"math/rand/v2"
	"testing"

	"github.com/amptcp/amptcp/cc/internal/cref"
)

// TestKernelDifferential drives the controls' C proportional rate
// reduction, pacing rate and restart after idle (ccmath.h, as the BPF
// programs run them) and the kernel's, transcribed here, with the same
// inputs: windows and counters of a recovery, and the edges the kernel's
// int arithmetic turns on (a threshold at and above 2^31, nothing sent yet,
// in flight above and below the threshold). They must agree exactly.
func TestKernelDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pick := func(vals ...uint32) uint32 { return vals[r.IntN(len(vals))] }
	for i := range 200_000 {
		ss := pick(2, 3, 10, uint32(r.IntN(1000)), 0x7fffffff, 2165326096, r.Uint32())
		inFlight := uint32(r.IntN(4000))
		prior := 1 + uint32(r.IntN(3000))
		delivered := uint32(r.IntN(5000))
		out := pick(0, uint32(r.IntN(4000)))
		newly := 1 + uint32(r.IntN(64))
		lost, adv := r.IntN(2) == 0, r.IntN(2) == 0
		c := cref.PRRCwnd(ss, inFlight, prior, delivered, out, newly, lost, adv)
		m := PRRCwnd(ss, inFlight, prior, delivered, out, newly, lost, adv)
		if c != m {
			t.Fatalf("case %d: ssthresh %d, in flight %d, prior %d, delivered %d, out %d, newly %d, lost %v, una advanced %v: C %d, kernel %d",
				i, ss, inFlight, prior, delivered, out, newly, lost, adv, c, m)
		}
		mss, cwnd, srtt := 1200+uint32(r.IntN(300)), uint32(r.IntN(100_000)), uint32(r.IntN(8_000_000))
		maxRate := pick64(r, ^uint64(0), uint64(r.Uint32()))
		if c, m := cref.PacingRate(mss, cwnd, ss, inFlight, srtt, maxRate), PacingRate(mss, cwnd, ss, inFlight, srtt, maxRate); c != m {
			t.Fatalf("case %d: pacing rate of mss %d, window %d, threshold %d, out %d, srtt %d/8 µs: C %d, kernel %d", i, mss, cwnd, ss, inFlight, srtt, c, m)
		}
		idle, rto := int32(r.IntN(200_000))-1000, 1+uint32(r.IntN(3000))
		if c, m := cref.RestartCwnd(cwnd, 10, idle, rto), RestartCwnd(cwnd, 10, idle, rto); c != m {
			t.Fatalf("case %d: restart of window %d after %d jiffies idle, RTO %d: C %d, kernel %d", i, cwnd, idle, rto, c, m)
		}
	}
}

func pick64(r *rand.Rand, vals ...uint64) uint64 { return vals[r.IntN(len(vals))] }

// TestPRRCwnd checks the reduction on a recovery the controls see: a
// window of 40 halved to 20, and what PRR does with the threshold the
// kernel sometimes takes without calling the control.
func TestPRRCwnd(t *testing.T) {
	// In flight 38 above the threshold 20: per two packets delivered, one sent.
	if got := PRRCwnd(20, 38, 40, 2, 0, 2, false, false); got != 38+1 {
		t.Errorf("first ACK of the recovery: window %d, want 39 (in flight + 1: the fast retransmit)", got)
	}
	if got := PRRCwnd(20, 30, 40, 20, 9, 2, false, false); got != 30+1 {
		t.Errorf("half the window delivered: window %d, want 31 (10 of 20 delivered sent)", got)
	}
	// Below the threshold: as many as delivered, one more on progress, up
	// to the threshold.
	if got := PRRCwnd(20, 15, 40, 22, 20, 3, false, true); got != 15+4 {
		t.Errorf("below the threshold: window %d, want 19", got)
	}
	if got := PRRCwnd(20, 15, 40, 30, 20, 3, false, true); got != 20 {
		t.Errorf("below the threshold, much delivered: window %d, want the threshold 20", got)
	}
	// A threshold of about 2^31 turns into a window of hundreds of millions.
	if got := PRRCwnd(2165326096, 16, 21, 3, 0, 3, false, false); got < 300_000_000 {
		t.Errorf("threshold 2165326096: window %d, want the kernel's hundreds of millions", got)
	}
}

// TestRestartCwnd: a window idle for two RTOs and a bit is halved twice, one idle
// for less than an RTO kept, and none falls below the initial window.
func TestRestartCwnd(t *testing.T) {
	for _, c := range []struct {
		cwnd     uint32
		idle     int32
		rto, out uint32
	}{{80, 2*200 + 1, 200, 20}, {80, 150, 200, 80}, {80, 100 * 200, 200, 10}, {6, 100 * 200, 200, 6}} {
		if got := RestartCwnd(c.cwnd, 10, c.idle, c.rto); got != c.out {
			t.Errorf("window %d idle %d jiffies, RTO %d: %d, want %d", c.cwnd, c.idle, c.rto, got, c.out)
		}
	}
}
