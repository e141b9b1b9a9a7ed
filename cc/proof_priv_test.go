package cc

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/linkemu"
)

// The proof tests run real MPTCP connections over the rig's emulated
// links and check the claims of the algorithms' papers. Each flow's
// sender keeps its subflows window-limited: socket buffers far above
// any window here (32 MiB) and a writer that never pauses; measure checks
// that the subflows spent less than a fifth of their busy time limited by
// the send buffer or the receiver's window. Runs are repeated and
// interleaved, and the tests compare medians (or medians of differences
// between runs of one repetition) with bounds that a broken
// (or uncoupled) algorithm misses but a correct one meets on a busy
// machine. The numbers go to the test log; docs/cc.md quotes them.

// Goodput of a TCP flow over a link of rate r, per bit of the link: 1448
// bytes of payload in 1514-byte frames (TCP timestamps on).
const goodput = 1448.0 / 1514

// rates is what measure saw: each flow's goodput (Mbit/s, at its
// receiver) and, for MPTCP flows, each subflow's by client address; and
// the fraction of the frames that the emulator wrote more than 5 ms late
// (a busy machine starved it: the run does not count).
type rates struct {
	flow    map[string]float64
	subflow map[string]map[int]float64
	late    float64
}

// lateFrames counts the frames the rig's links wrote, and those more
// than 5 ms late.
func (rg *rig) lateFrames() (all, late uint64) {
	for _, l := range rg.bottlenecks {
		st, err := l.Stats()
		if err != nil {
			rg.t.Fatal(err)
		}
		for _, h := range []linkemu.Histogram{st.AB.Lateness, st.BA.Lateness} {
			all += h.Count
			for i, c := range h.Counts {
				if i == len(linkemu.LatenessBounds) || linkemu.LatenessBounds[i] > 5*time.Millisecond {
					late += c
				}
			}
		}
	}
	return all, late
}

// sockTally is a flow's sockets from one client address over a
// measurement: their counters summed, at the start and at the end, and
// the samples taken meanwhile.
type sockTally struct {
	start, end            sockStat
	ended                 bool // read at the end
	instants, n, recovery int
	cwnd                  uint32
	maxCwnd               uint32 // the largest window of a sample
	srtt                  time.Duration
}

// When tally reads a flow's sockets.
const (
	atStart   = iota // the counters at the start
	meanwhile        // a sample
	atEnd            // the counters at the end, and a sample
)

// tally reads the flow's sockets into its tallies by client address.
func tally(f *flow, by map[int]*sockTally, when int) {
	ss, err := f.sockets()
	if err != nil {
		return
	}
	seen := map[int]bool{}
	for _, s := range ss {
		tl := by[s.addr]
		if tl == nil {
			tl = &sockTally{}
			by[s.addr] = tl
		}
		if when != meanwhile {
			c := &tl.end
			if when == atStart {
				c = &tl.start
			} else {
				tl.ended = true
			}
			c.acked += s.acked
			c.dataOut += s.dataOut
			c.segsIn += s.segsIn
			c.retrans += s.retrans
			c.busy += s.busy
			c.sndbuf += s.sndbuf
			c.rwnd += s.rwnd
		}
		if when == atStart {
			continue
		}
		if !seen[s.addr] {
			seen[s.addr] = true
			tl.instants++
		}
		tl.n++
		tl.cwnd += s.cwnd
		tl.maxCwnd = max(tl.maxCwnd, s.cwnd)
		tl.srtt += s.srtt
		if s.recovery {
			tl.recovery++
		}
	}
}

// pct is a as a percentage of b (0 if b is not positive).
func pct[T int | uint32 | time.Duration](a, b T) float64 {
	if b <= 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// describe is what the sockets did over secs: rate, mean window and
// smoothed RTT and the time in loss recovery (sampled), retransmitted
// segments, payload per segment sent the first time, ACKs received per
// data segment sent (about 1/2 when the receiver acknowledges every
// second segment), and the time limited by the send buffer or the
// receiver's window, or idle.
func (tl *sockTally) describe(secs float64) string {
	a, o := tl.end, tl.start
	busy := a.busy - o.busy
	out := a.dataOut - o.dataOut
	retrans := a.retrans - o.retrans
	return fmt.Sprintf("%.2f Mbit/s, cwnd %.1f, srtt %.1f ms, in recovery %.0f %%, retransmitted %.2f %%, %.0f bytes a new segment, %.2f ACKs a segment, send-buffer limited %.0f %%, receive-window limited %.0f %%, idle %.0f %%",
		tl.rate(secs), float64(tl.cwnd)/float64(max(tl.instants, 1)), tl.srtt.Seconds()*1000/float64(max(tl.n, 1)),
		pct(tl.recovery, tl.n), pct(retrans, out), float64(a.acked-o.acked)/float64(max(out-min(retrans, out), 1)),
		float64(a.segsIn-o.segsIn)/float64(max(out, 1)),
		pct(a.sndbuf-o.sndbuf, busy), pct(a.rwnd-o.rwnd, busy), max(0, 100*(1-busy.Seconds()/secs)))
}

// rate is the sockets' acknowledged bytes over secs, in Mbit/s.
func (tl *sockTally) rate(secs float64) float64 {
	return float64(tl.end.acked-tl.start.acked) * 8 / secs / 1e6
}

// measure runs the flows for warmup, then measures them for d. It logs
// what each flow's sockets did meanwhile (sockTally.describe), sampled
// every 250 ms.
func (rg *rig) measure(flows []*flow, warmup, d time.Duration) rates {
	t := rg.t
	t.Helper()
	time.Sleep(warmup)
	all0, late0 := rg.lateFrames()
	tallies := make([]map[int]*sockTally, len(flows))
	recv := make([]int64, len(flows))
	for i, f := range flows {
		tallies[i] = map[int]*sockTally{}
		recv[i] = f.received.Load()
		tally(f, tallies[i], atStart)
	}
	insane0 := insaneCounts(t)
	start := time.Now()
	if tracing() {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { rg.trace(flows, stop); close(done) }()
		defer func() { close(stop); <-done }()
	}
	for end := start.Add(d); ; {
		time.Sleep(min(time.Until(end), 250*time.Millisecond))
		when := meanwhile
		if !time.Now().Before(end) {
			when = atEnd
		}
		for i, f := range flows {
			tally(f, tallies[i], when)
		}
		if when == atEnd {
			break
		}
	}
	r := rates{flow: map[string]float64{}, subflow: map[string]map[int]float64{}}
	secs := time.Since(start).Seconds()
	for n, c := range insaneCounts(t) {
		if c > insane0[n] {
			t.Logf("%s brought back %d windows or thresholds far above any it set (insane, docs/cc.md \"Kernel quirks\")", n, c-insane0[n])
		}
	}
	if all1, late1 := rg.lateFrames(); all1 > all0 {
		r.late = float64(late1-late0) / float64(all1-all0)
	}
	for i, f := range flows {
		r.flow[f.name] = float64(f.received.Load()-recv[i]) * 8 / secs / 1e6
		var sndbuf, rwnd, busy time.Duration
		for _, k := range slices.Sorted(maps.Keys(tallies[i])) {
			tl := tallies[i][k]
			if !tl.ended {
				continue // gone meanwhile
			}
			t.Logf("%s, address %d: %s", f.name, k, tl.describe(secs))
			if tl.maxCwnd > insaneWindow {
				t.Logf("%s, address %d: a sample read a window of %d packets", f.name, k, tl.maxCwnd)
			}
			sndbuf += tl.end.sndbuf - tl.start.sndbuf
			rwnd += tl.end.rwnd - tl.start.rwnd
			busy += tl.end.busy - tl.start.busy
			if !f.multipath {
				continue
			}
			if r.subflow[f.name] == nil {
				r.subflow[f.name] = map[int]float64{}
			}
			r.subflow[f.name][k] = tl.rate(secs)
			// A window-limited subflow always has data in flight: one
			// idle (neither sending nor waiting for an ACK) was left
			// without data by its connection, which neither limit below
			// counts (MPTCP's head-of-line blocking, see sendBuffers).
			if idle := 1 - (tl.end.busy-tl.start.busy).Seconds()/secs; idle > 0.2 {
				t.Errorf("flow %s: its subflow from address %d was idle %.0f %% of the measurement: the test needs it window-limited", f.name, k, 100*idle)
			}
		}
		if f.multipath && pct(sndbuf, busy)+pct(rwnd, busy) > 20 {
			t.Errorf("flow %s: its subflows were limited by the send buffer %.0f %% and by the receiver's window %.0f %% of their busy time: the test needs them window-limited", f.name, pct(sndbuf, busy), pct(rwnd, busy))
		}
	}
	return r
}

// insaneWindow is more packets than any window of the rig holds: a
// sample above it caught the kernel's quirk that the controls' insane
// counter counts.
const insaneWindow = 1 << 16

// insaneCounts reads each loaded control's insane counter.
func insaneCounts(t *testing.T) map[string]uint64 {
	st, err := ReadStatus()
	if err != nil {
		t.Logf("cc status: %v", err)
	}
	out := map[string]uint64{}
	if st != nil {
		for _, c := range st.Controls {
			out[c.Name] = c.Counters.Insane
		}
	}
	return out
}

// disturbed says that a busy machine starved the emulator during the run.
func (r rates) disturbed() bool { return r.late > 0.01 }

// run measures a run until it is not disturbed, 4 tries at most.
func (rg *rig) run(what string, fn func() rates) rates {
	rg.t.Helper()
	for try := 1; ; try++ {
		r := fn()
		if !r.disturbed() {
			return r
		}
		rg.t.Logf("%s: %.1f %% of the frames were more than 5 ms late: the machine starved the emulator, run again", what, 100*r.late)
		if try == 4 {
			rg.t.Fatalf("%s: the emulation was disturbed in %d runs out of %d: the machine is too busy for this test", what, try, try)
		}
		time.Sleep(2 * time.Second)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func requireLong(t *testing.T) {
	t.Helper()
	testenv.RequireLong(t, "minutes of emulated traffic")
	requireStructOps(t)
}

// loadAll registers the coupled controls for the test, unless registered.
func loadAll(t *testing.T) {
	t.Helper()
	for _, n := range Names {
		release, err := Use(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { release() })
	}
}

// settle lets the connections of a run close before the next starts.
const settle = 2 * time.Second

// Shared bottleneck: a connection of two subflows against one TCP flow
// through the same link. Uncoupled Reno takes about two thirds (two TCP
// flows against one); each coupled control about half, as one TCP would
// (RFC 6356 §2, goal 2: do no harm), and clearly less than uncoupled Reno
// measured beside it. wVegas is delay-based: it competes against a wVegas
// connection of one subflow (a loss-based flow would push it off the
// path, and Linux's Vegas keeps 2-4 packets queued where a wVegas
// connection keeps 10).
//
// What uncoupled Reno takes is not bounded: on this kernel it takes
// 0.44-0.65 a run (median 0.53), not the 0.667 of two TCP flows against
// one (the model, cc/model/netsim TestSharedBottleneckModel, and the rig
// with two TCP flows or two MPTCP connections of one subflow each). Two
// subflows of one connection lose three to five times as large a share
// of their packets at the queue as the TCP flow; docs/cc.md has the
// captures. The test checks that both its subflows carried traffic (a
// quarter of the connection's each) and compares each coupled control
// with it. A coupled connection's subflows pay the same: its share is
// bounded by 0.25-0.6 (medians on the rig 0.34-0.46, in the model
// 0.43-0.59; a control held at three packets takes 0.08).
//
// Clearly less than uncoupled Reno: Reno runs twice in each repetition,
// and each loss-based control's share is subtracted from the mean of
// the two, one or two runs away from it, so that the machine's load
// drifting between repetitions weighs on both sides; the median of the
// differences over the repetitions must be at least sharedRenoGap. The
// numbers are TestSharedBottleneckDesign's: it resamples 63 runs of each
// control on the rig (testdata/shared-bottleneck-runs.txt; Reno's sd
// 0.043 a run, the controls' 0.069-0.088, the gap's mean 0.11, where the
// model predicts 0.167) and finds that a run of this test with correct
// controls misses the bound about once in 35, and that a control that
// behaves as uncoupled Reno passes it about once in 150. (Seven
// repetitions and 0.07, the design before, fail about one run in four:
// three of the nine recorded did.) wVegas has no Reno comparison; its share
// varies little (sd 0.016), and sharedWVegasReps bound it.
func TestSharedBottleneck(t *testing.T) {
	requireLong(t)
	loadAll(t)
	// 20 Mbit/s, 20 ms RTT, a queue of one bandwidth-delay product, for
	// the two addresses of the MPTCP connection and the TCP flow's.
	rg := newRig(t, []linkemu.Params{bottleneck(20*mbit, 10*time.Millisecond, 1)}, []int{0, 0, 0}, 2)
	tcpOf := map[string]string{WVegas: WVegas} // the competitor's control; reno otherwise
	single := map[string]bool{WVegas: true}    // the competitor: an MPTCP connection of one subflow
	// The TCP flow starts from address 3. The kernel's path manager adds
	// a subflow from every endpoint (address 2) to every MPTCP connection
	// but from the one it started from: a competitor of one subflow
	// starts from address 2 (it had two subflows from address 3).
	from := map[bool]int{false: 3, true: 2}
	shares := map[string][]float64{} // by control, repetition by repetition
	for rep := range sharedReps {
		var controls []string // rotated, so that each comes first in turn
		for i := range Coupled {
			n := Coupled[(i+rep)%len(Coupled)]
			if n != WVegas || rep < sharedWVegasReps {
				controls = append(controls, n)
			}
		}
		// Reno second and last: every control one or two runs from one.
		order := append([]string{controls[0], "reno"}, controls[1:]...)
		order = append(order, "reno")
		for _, n := range order {
			tcpCC := cmp.Or(tcpOf[n], "reno")
			what := fmt.Sprintf("rep %d, %s against %s TCP", rep, n, tcpCC)
			r := rg.run(what, func() rates {
				m := rg.startFlow("mptcp", n, true, 1)
				tcp := rg.startFlow("tcp", tcpCC, single[tcpCC], from[single[tcpCC]])
				defer time.Sleep(settle)
				defer tcp.stop()
				defer m.stop()
				r := rg.measure([]*flow{m, tcp}, 4*time.Second, 10*time.Second)
				if ss, err := tcp.sockets(); err != nil || len(ss) != 1 {
					t.Errorf("%s: the competitor has %d subflows (%v), want one", what, len(ss), err)
				}
				return r
			})
			share := r.flow["mptcp"] / (r.flow["mptcp"] + r.flow["tcp"])
			if n == "reno" {
				for k := 1; k <= 2; k++ {
					if sf := r.subflow["mptcp"][k]; sf < 0.25*r.flow["mptcp"] {
						t.Errorf("%s: uncoupled Reno's subflow from address %d carried %.2f of %.2f Mbit/s: the two subflows did not compete as two flows", what, k, sf, r.flow["mptcp"])
					}
				}
			}
			t.Logf("%s: MPTCP %.2f Mbit/s (subflows %.2f + %.2f), TCP %.2f: share %.3f",
				what, r.flow["mptcp"], r.subflow["mptcp"][1], r.subflow["mptcp"][2], r.flow["tcp"], share)
			shares[n] = append(shares[n], share)
		}
	}
	var reno []float64 // the mean of each repetition's two runs
	for i := 0; i+1 < len(shares["reno"]); i += 2 {
		reno = append(reno, (shares["reno"][i]+shares["reno"][i+1])/2)
	}
	t.Logf("shares: reno %.3f, by repetition %.3f (median %.3f)", shares["reno"], reno, median(reno))
	for _, n := range Coupled {
		s := median(shares[n])
		t.Logf("shares: %s %.3f (median %.3f)", n, shares[n], s)
		if s < 0.25 || s > 0.6 {
			t.Errorf("%s took %.3f of a shared bottleneck, want 0.25-0.6", n, s)
		}
		if n == WVegas {
			continue
		}
		var less []float64
		for i, x := range shares[n] {
			less = append(less, reno[i]-x)
		}
		if g := median(less); g < sharedRenoGap {
			t.Errorf("%s took less than uncoupled Reno beside it by %.3f (median; by repetition %.3f), want at least %.3f", n, g, less, sharedRenoGap)
		}
	}
}

// Disjoint bottlenecks: each coupled control uses both paths, at least
// 0.9 of what one TCP gets on each alone (RFC 6356 §2, goal 1: improve
// throughput), measured in the same run.
func TestDisjointBottlenecks(t *testing.T) {
	requireLong(t)
	loadAll(t)
	link := bottleneck(10*mbit, 10*time.Millisecond, 1)
	rg := newRig(t, []linkemu.Params{link, link}, []int{0, 1}, 2)
	var alone float64
	for k := 1; k <= 2; k++ {
		r := rg.run(fmt.Sprintf("TCP alone on path %d", k), func() rates {
			f := rg.startFlow("tcp", "reno", false, k)
			defer time.Sleep(settle)
			defer f.stop()
			return rg.measure([]*flow{f}, 3*time.Second, 8*time.Second)
		})
		t.Logf("TCP alone on path %d: %.2f Mbit/s", k, r.flow["tcp"])
		alone += r.flow["tcp"]
	}
	totals := map[string][]float64{}
	for rep := range 2 {
		for i := range Coupled {
			n := Coupled[(i+rep)%len(Coupled)]
			what := fmt.Sprintf("rep %d, %s", rep, n)
			r := rg.run(what, func() rates {
				f := rg.startFlow("mptcp", n, true, 1)
				defer time.Sleep(settle)
				defer f.stop()
				return rg.measure([]*flow{f}, 4*time.Second, 8*time.Second)
			})
			t.Logf("%s: %.2f Mbit/s (subflows %.2f + %.2f) of %.2f", what, r.flow["mptcp"],
				r.subflow["mptcp"][1], r.subflow["mptcp"][2], alone)
			totals[n] = append(totals[n], r.flow["mptcp"])
		}
	}
	for _, n := range Coupled {
		if got := median(totals[n]); got < 0.9*alone {
			t.Errorf("%s moved %.2f Mbit/s over two disjoint paths, less than 0.9 of the %.2f two TCP flows get on them", n, got, alone)
		}
	}
}

// [Khalili12]'s problem P2 on its smallest scenario: a multipath user
// with a path of its own and a path shared with a TCP user. LIA sends too
// much over the shared, congested path and takes from the TCP user more
// than it needs; OLIA, Pareto-optimal, leaves the shared path to the TCP
// user while its own path serves it. BALIA ([Peng16]) sits between.
func TestFriendliness(t *testing.T) {
	requireLong(t)
	loadAll(t)
	link := bottleneck(10*mbit, 10*time.Millisecond, 1)
	capacity := 10 * goodput
	// Path 1 (address 1) alone on bottleneck 1; path 2 (address 2) and
	// the TCP user (address 3) on bottleneck 2.
	rg := newRig(t, []linkemu.Params{link, link}, []int{0, 1, 1}, 2)
	tcpShare := map[string][]float64{}
	mptcp := map[string][]float64{}
	variants := []string{"reno", LIA, OLIA, BALIA}
	for rep := range 2 {
		for i := range variants {
			n := variants[(i+rep)%len(variants)]
			what := fmt.Sprintf("rep %d, %s", rep, n)
			r := rg.run(what, func() rates {
				m := rg.startFlow("mptcp", n, true, 1)
				tcp := rg.startFlow("tcp", "reno", false, 3)
				defer time.Sleep(settle)
				defer tcp.stop()
				defer m.stop()
				return rg.measure([]*flow{m, tcp}, 6*time.Second, 12*time.Second)
			})
			t.Logf("%s: own path %.2f, shared path %.2f, TCP %.2f Mbit/s", what,
				r.subflow["mptcp"][1], r.subflow["mptcp"][2], r.flow["tcp"])
			tcpShare[n] = append(tcpShare[n], r.flow["tcp"]/capacity)
			mptcp[n] = append(mptcp[n], r.flow["mptcp"])
		}
	}
	share := func(n string) float64 { return median(tcpShare[n]) }
	t.Logf("the TCP user's share of the shared path: reno %.3f, lia %.3f, olia %.3f, balia %.3f",
		share("reno"), share(LIA), share(OLIA), share(BALIA))
	if share(LIA) < share("reno")+0.05 {
		t.Errorf("LIA left the TCP user %.3f of its path, not more than uncoupled Reno's %.3f", share(LIA), share("reno"))
	}
	// OLIA's Pareto-optimal allocation leaves the whole shared path to
	// the TCP user, but no subflow goes below two packets (Linux's
	// least window, and OLIA's decrease stops there): two packets per
	// RTT of 20-40 ms are 0.6-1.2 Mbit/s, so OLIA can leave at most
	// oliaCeiling (taking the largest floor). LIA leaves 0.7 of the path
	// in the fluid model, 0.80 in the packet simulation of the model
	// (cc/model/netsim) and 0.82-0.88 on these links, close enough to
	// the ceiling that a fixed margin above it could exceed what any
	// OLIA reaches; OLIA must instead close at least half of the gap
	// between LIA and the ceiling. An OLIA that behaves as LIA closes
	// none of it.
	if want := share(LIA) + (oliaCeiling-share(LIA))/2; share(OLIA) < 0.8 || share(OLIA) < want {
		t.Errorf("OLIA left the TCP user %.3f of its path, want at least 0.8 and %.3f (half-way from LIA's %.3f to the %.3f that OLIA's two-packet floor allows)", share(OLIA), want, share(LIA), oliaCeiling)
	}
	if share(BALIA) < share(LIA)-0.05 {
		t.Errorf("BALIA left the TCP user %.3f, less than LIA's %.3f", share(BALIA), share(LIA))
	}
	for _, n := range []string{LIA, OLIA, BALIA} {
		if got := median(mptcp[n]); got < 0.9*capacity {
			t.Errorf("%s: the multipath user got %.2f Mbit/s, less than 0.9 of its own path", n, got)
		}
	}
}

// oliaCeiling is the most of the shared path OLIA can leave the TCP user
// in TestFriendliness: all but two packets per base RTT (20 ms).
const oliaCeiling = 1 - 2*1448*8/0.020/1e6/(10*goodput)

// Responsiveness on the same scenario ([Peng16]): when the TCP user of
// the shared path leaves, how long the multipath user takes to fill it,
// in three repetitions taken in turns. Each coupled control must take it
// within 10 s (median): the model takes 1-2.5 s (cc/model/netsim,
// TestResponsivenessModel), the rig 1-12.5 s a run (medians 1.5-5.5 s).
// [Peng16] reports OLIA slow to respond and designed BALIA to fix it:
// BALIA's median must be at most OLIA's. On the rig OLIA was the slower
// in 13 of 17 runs, by 0.5-9 s (medians 3.5 s against 2.0), the faster
// in 2. In the model it is not: it takes 1.5 s there against BALIA's 2 s,
// since with no more losses on the shared path its loss interval there
// soon outgrows that of its own path, whose queue still overflows; what
// the model leaves out (the scheduler, the subflows' extra losses) makes
// the difference, and the bound is at most, not less.
func TestResponsiveness(t *testing.T) {
	requireLong(t)
	loadAll(t)
	link := bottleneck(10*mbit, 10*time.Millisecond, 1)
	capacity := 10 * goodput
	rg := newRig(t, []linkemu.Params{link, link}, []int{0, 1, 1}, 2)
	controls := []string{LIA, BALIA, OLIA}
	took := map[string][]float64{} // seconds, by control
	for rep := range 3 {
		for i := range controls {
			n := controls[(i+rep)%len(controls)]
			var d time.Duration
			rg.run(n, func() rates {
				m := rg.startFlow("mptcp", n, true, 1)
				tcp := rg.startFlow("tcp", "reno", false, 3)
				defer time.Sleep(settle)
				defer m.stop()
				time.Sleep(15 * time.Second)
				tcp.stop()
				all0, late0 := rg.lateFrames()
				d = fillTime(t, m, 2, 0.7*capacity, 30*time.Second)
				all1, late1 := rg.lateFrames()
				return rates{late: float64(late1-late0) / float64(max(all1-all0, 1))}
			})
			took[n] = append(took[n], d.Seconds())
			t.Logf("rep %d, %s: the shared path carried 0.7 of its capacity %v after the TCP user left", rep, n, d.Round(100*time.Millisecond))
		}
	}
	for _, n := range controls {
		t.Logf("%s: %.1f s (median; %.1f s)", n, median(took[n]), took[n])
		if m := median(took[n]); m > 10 {
			t.Errorf("%s took %.1f s (median) to use the path the TCP user left, want within 10 s", n, m)
		}
	}
	if b, o := median(took[BALIA]), median(took[OLIA]); b > o {
		t.Errorf("BALIA took %.1f s and OLIA %.1f s (medians): BALIA should respond at least as fast ([Peng16])", b, o)
	}
}

// fillTime samples the rate of m's subflows from client address k every
// 500 ms and returns when two samples in a row reached rate, or limit.
func fillTime(t *testing.T, m *flow, k byte, rate float64, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var prev uint64
	at := time.Now()
	streak := 0
	for time.Since(start) < limit {
		time.Sleep(500 * time.Millisecond)
		fi, err := m.fullInfo()
		if err != nil {
			t.Fatal(err)
		}
		var acked uint64
		for _, s := range fi.Subflows {
			if s.Local.Addr().As4()[2] == k {
				acked += s.TCP.BytesAcked
			}
		}
		r := float64(acked-prev) * 8 / time.Since(at).Seconds() / 1e6
		if prev == 0 {
			r = 0
		}
		prev, at = acked, time.Now()
		if r < rate {
			streak = 0
		} else if streak++; streak == 2 {
			return time.Since(start) - 500*time.Millisecond
		}
	}
	return limit
}

// [Cao12]: wVegas moves traffic off a path whose queue grows. Two
// disjoint paths with deep queues; a loss-based TCP flow joins path 2 and
// fills its queue. wVegas then sends little there and carries on over
// path 1; LIA, loss-based, keeps its share of path 2.
func TestWVegasLeavesAGrowingQueue(t *testing.T) {
	requireLong(t)
	loadAll(t)
	link := bottleneck(10*mbit, 10*time.Millisecond, 4)
	capacity := 10 * goodput
	rg := newRig(t, []linkemu.Params{link, link}, []int{0, 1, 1}, 2)
	onPath2 := map[string]float64{}
	for _, n := range []string{WVegas, LIA} {
		var alone, shared rates
		rg.run(n, func() rates {
			m := rg.startFlow("mptcp", n, true, 1)
			defer time.Sleep(settle)
			defer m.stop()
			alone = rg.measure([]*flow{m}, 4*time.Second, 8*time.Second)
			tcp := rg.startFlow("tcp", "reno", false, 3)
			defer tcp.stop()
			shared = rg.measure([]*flow{m, tcp}, 5*time.Second, 12*time.Second)
			return rates{late: max(alone.late, shared.late)}
		})
		t.Logf("%s alone: path 1 %.2f, path 2 %.2f Mbit/s", n, alone.subflow["mptcp"][1], alone.subflow["mptcp"][2])
		t.Logf("%s with TCP on path 2: path 1 %.2f, path 2 %.2f, TCP %.2f Mbit/s", n,
			shared.subflow["mptcp"][1], shared.subflow["mptcp"][2], shared.flow["tcp"])
		for k := 1; k <= 2; k++ {
			if alone.subflow["mptcp"][k] < 0.25*alone.flow["mptcp"] {
				t.Errorf("%s alone sent %.2f of %.2f Mbit/s over path %d: it should use both", n, alone.subflow["mptcp"][k], alone.flow["mptcp"], k)
			}
		}
		onPath2[n] = shared.subflow["mptcp"][2]
		if n == WVegas {
			if shared.subflow["mptcp"][1] < 0.8*capacity {
				t.Errorf("wVegas carried %.2f Mbit/s over path 1, want at least 0.8 of it", shared.subflow["mptcp"][1])
			}
			if shared.subflow["mptcp"][2] > 0.15*capacity {
				t.Errorf("wVegas kept %.2f Mbit/s on path 2 whose queue the TCP flow fills, want at most 0.15 of it", shared.subflow["mptcp"][2])
			}
		}
	}
	if onPath2[LIA] < 2*onPath2[WVegas] {
		t.Errorf("on the path with the growing queue: LIA %.2f, wVegas %.2f Mbit/s: wVegas should leave it far more", onPath2[LIA], onPath2[WVegas])
	}
}
