package lab

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
)

// checkFidelity checks a run of runTopology's lab: its one path, from
// the server to the client (a download's data) over p1 or p2 (2 ms and
// 10 Mbit/s each way), measured against that configuration. Whether the
// run met it depends on the machine's load, so only a measurement far
// from it fails the test: one that an emulator without the delay or the
// rate would give, or one that applied them twice. How close the
// emulation comes is the linkemu benchmarks' measurement.
func checkFidelity(t *testing.T, r *results.Run) {
	t.Helper()
	f := r.Fidelity
	if f == nil || len(f.Paths) != 1 {
		t.Errorf("run %s: fidelity %+v, want the path from client to server", r.ID, f)
		return
	}
	p := f.Paths[0]
	t.Logf("run %s: fidelity ok %v, p99 lateness %v: %+v", r.ID, f.OK, f.LatenessP99, p)
	// 4 ms of delay, and a probe of 100 bytes or less serialized twice
	// at 10 Mbit/s: 160 us at most.
	if !strings.HasPrefix(p.Name, "server>client via p") || p.RTTWant < 4*time.Millisecond || p.RTTWant > 4200*time.Microsecond {
		t.Errorf("run %s: path %q wants an RTT of %v, want about 4.1 ms", r.ID, p.Name, p.RTTWant)
	}
	// 10 Mbit/s times the payload's share of the frames the link
	// delivered: 1412 bytes of a tunnelled TCP segment, or 1448 of a plain
	// one, in 1514; more when the flow was slow and the direction's
	// other, small frames weigh more in the mean; never the whole rate.
	if p.RateWant < 9.2e6 || p.RateWant > 10e6 {
		t.Errorf("run %s: path wants %.2f Mbit/s, want 9.3 to 10", r.ID, p.RateWant/1e6)
	}
	if p.RTT < p.RTTWant-RTTTolerance || p.Rate <= 0 || p.Rate > p.RateWant*1.1 {
		t.Errorf("run %s: measured RTT %v, %.2f Mbit/s: far from the link's", r.ID, p.RTT, p.Rate/1e6)
	}
	// A loaded machine slows the flow (to 5.5 of 9.6 Mbit/s with every
	// CPU busy), and the emulator says so by its lateness; when it kept
	// to its limit, the flow gets half the rate at least.
	if f.LatenessP99 <= LatenessLimit && p.Rate < p.RateWant/2 {
		t.Errorf("run %s: %.2f Mbit/s of %.2f, with the emulator on time", r.ID, p.Rate/1e6, p.RateWant/1e6)
	}
	// Without the delays, the path costs the serialization and the
	// stacks: less than with them, by about their 4 ms (less 1 ms: the
	// stacks' costs vary between the two measurements). More only by what
	// the emulator says it was late, a frame each way (on a machine with
	// every CPU busy, its p99 reached 20 ms and the RTT 19 ms), and 2 ms:
	// an emulator that applied the delays twice misses on a quiet machine
	// (TestEmulatedLinks times the delays themselves, by the fastest of
	// its round trips, which a loaded machine does not move).
	most := 4*time.Millisecond + 2*f.LatenessP99 + 2*time.Millisecond
	if added := p.RTT - p.RTTBase; p.RTTBase <= 0 || added < 3*time.Millisecond || added >= most {
		t.Errorf("run %s: RTT %v, %v without the delays: the links added %v, want about 4 ms (less than %v)", r.ID, p.RTT, p.RTTBase, added, most)
	}
	if f.OK != (p.OK && f.LatenessP99 <= LatenessLimit) || r.Flagged() == f.OK || f.Error != "" {
		t.Errorf("run %s: fidelity ok %v flagged %v error %q, path ok %v, p99 lateness %v", r.ID, f.OK, r.Flagged(), f.Error, p.OK, f.LatenessP99)
	}
}

// TestRunFlagsAMissedPath runs a scenario whose lab's links are slowed
// down, behind the runner's back, to 6 ms each way after the lab came
// up: the measured RTT is three times the configured one, and the run
// is flagged, in runs.jsonl and in the progress.
func TestRunFlagsAMissedPath(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-fid"
	exp := strings.Replace(runScenario, "repetitions: 2", "repetitions: 1", 1)
	s := loadRunScenario(t, name, strings.Replace(exp, "pm: [tcp, subflows 2]", "pm: [tcp]", 1))
	beforeFidelity = func(links LinkControl) {
		for _, l := range []string{"p1", "p2"} {
			if err := links.Apply(topo.Event{Link: l, Action: topo.ActionSet, Delay: "6ms"}); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { beforeFidelity = nil }()
	res, progress := runTestScenario(t, s, "exp.yaml")
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(res.Runs))
	}
	r := res.Runs[0]
	if !r.Flagged() || len(r.Fidelity.Paths) != 1 {
		t.Fatalf("run not flagged: fidelity %+v", r.Fidelity)
	}
	p := r.Fidelity.Paths[0]
	if p.OK || p.RTTWant > 4200*time.Microsecond || p.RTT < 12*time.Millisecond {
		t.Errorf("path %+v: want an RTT of 12 ms or more measured against about 4.1 ms configured", p)
	}
	if !strings.Contains(progress, "[1/1] warning: the emulation missed its configuration: server>client via p") {
		t.Errorf("no warning in the progress")
	}
}

// loadRunScenario writes runTopology and the scenario exp, both with the
// lab's name, to a directory of the test and loads the scenario.
func loadRunScenario(t *testing.T, name, exp string) *scenario.Scenario {
	t.Helper()
	dir := t.TempDir()
	for file, text := range map[string]string{"lab.yaml": runTopology, "exp.yaml": exp} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strings.ReplaceAll(text, "NAME", name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Load(filepath.Join(dir, "exp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSingleFlowRateOnADropTailQueue measures the rate of [A-MPTCP]'s
// 4 Mbit/s data-centre uplink (a 50 KB drop-tail queue, 40 ms of RTT,
// the demo's lab) ten times. A single cubic flow loses a few frames to
// the queue after slow start; its receiver then gets nothing for a round
// trip and a burst after, which moved the receiver's goodput over the
// measured 1.5 s by up to 6 % either way, so that the check flagged runs
// whose link was right (3 of 8 in a `make demo`). The link's own
// delivery is what the check now judges: every measurement within 3 %
// of the configured rate, but for flows during which the machine held
// the emulator up (a p99 lateness above 10 times its limit).
func TestSingleFlowRateOnADropTailQueue(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-rate"
	b, err := os.ReadFile("../docs/scenarios/cloud-access-topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	top, err := topo.Parse([]byte(strings.Replace(string(b), "name: cloud", "name: "+name, 1)))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, opts)
	ctx := context.Background()
	if _, err := Up(ctx, top, "cloud-access-topology.yaml", opts); err != nil {
		t.Fatal(err)
	}
	plan, err := topo.Compile(top, opts.dir(name))
	if err != nil {
		t.Fatal(err)
	}
	links, err := OpenLinks(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm(ctx, plan, []scenario.Planned{{Flow: scenario.Flow{From: "client", To: "server"}}}); err != nil {
		t.Fatal(err)
	}
	measured, receiverMissed := 0, 0
	for i := range 10 {
		fm, err := singleFlow(ctx, plan, links, ends{from: "server", to: "client"}, 40*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		first, last := fm.snaps[0].stats, fm.snaps[len(fm.snaps)-1].stats
		data := crossed(first, last, func(_, bytes uint64) bool { return bytes > 500_000 })
		want, got := wantRate(plan, first, last, data, fm.mss), linkRate(plan, fm, data)
		late := Lateness(first, last)
		t.Logf("flow %d via %s: link %.3f, receiver %.3f of %.3f Mbit/s; p99 lateness %v", i, pathName(data), got/1e6, fm.goodput/1e6, want/1e6, late)
		// 4 Mbit/s times 1412 of 1514 bytes is 3.730. The payload's share
		// is the MSS over the mean frame, so that frames shorter than a
		// full segment raise it a little: a busy machine's sender wrote
		// some (a mean frame of 1,500 bytes made 3.765), and the link's
		// rate, judged below, is taken with the same share.
		if want < 3.7e6 || want > 3.8e6 {
			t.Fatalf("configured %.3f Mbit/s, want 4 Mbit/s times 1412 of 1514 bytes", want/1e6)
		}
		if math.Abs(fm.goodput-want) > RateTolerance*want {
			receiverMissed++
		}
		if late > 10*LatenessLimit {
			continue // the machine held the emulator up: not the check's to judge
		}
		measured++
		if math.Abs(got-want) > RateTolerance*want {
			t.Errorf("flow %d: the link delivered %.3f Mbit/s of payload, configured %.3f", i, got/1e6, want/1e6)
		}
	}
	t.Logf("%d of 10 flows judged; the receivers' goodput missed 3 %% in %d", measured, receiverMissed)
}
