package dataplane

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testRun runs the bench for real with short runs, named with this test
// process's prefix, and checks afterwards that it left no namespace,
// link or program behind.
type testRun struct {
	t     *testing.T
	opts  Options
	mu    sync.Mutex
	pids  map[int]string
	lines []string
}

func newTestRun(t *testing.T, name string, variants ...string) *testRun {
	testenv.RequireRoot(t)
	iperf3 := testenv.RequireTool(t, "iperf3")
	tr := &testRun{t: t, pids: map[int]string{}}
	tr.opts = Options{
		Variants: variants, Streams: []int{1}, Duration: time.Second, Repetitions: 1, Iperf3: iperf3,
		Prefix: testenv.Prefix + "-" + name + "-", LinkPrefix: testenv.Prefix + "-",
		Progress: func(line string) {
			tr.mu.Lock()
			tr.lines = append(tr.lines, line)
			tr.mu.Unlock()
			t.Log(line)
		},
		Started: func(what string, pid int) {
			tr.mu.Lock()
			tr.pids[pid] = what
			tr.mu.Unlock()
		},
	}
	return tr
}

// checkClean fails the test if anything the bench created is left.
func (tr *testRun) checkClean() {
	t := tr.t
	if names, err := netns.List(tr.opts.Prefix); err != nil || len(names) > 0 {
		t.Errorf("namespaces left: %v %v", names, err)
	}
	if names, err := netns.Links(tr.opts.LinkPrefix); err != nil || len(names) > 0 {
		t.Errorf("links left in the root namespace: %v %v", names, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.pids) == 0 {
		t.Error("the bench reported no program it started")
	}
	for pid, what := range tr.pids {
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("%s (pid %d) still runs: kill 0 = %v", what, pid, err)
		}
	}
}

// TestRunPlainAndVXLAN measures plain routing and VXLAN for a second in
// both profiles: every run moves data, and nothing is left afterwards.
func TestRunPlainAndVXLAN(t *testing.T) {
	tr := newTestRun(t, "pv", "plain", "vxlan")
	res, err := Run(context.Background(), tr.opts)
	tr.checkClean()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Variants {
		if !v.Up {
			t.Errorf("%s did not come up: %s", v.Name, v.Error)
		}
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 2 variants × 2 profiles", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Error != "" || r.Gbps <= 0 || r.Iperf == nil || r.Iperf.Bytes == 0 || r.Packets == 0 ||
			r.Mpps <= 0 || r.UnderlayMpps <= 0 || r.CPU.Busy <= 0 || r.CPUPerGbps <= 0 ||
			r.CPU.Own <= 0 || r.CPU.Own < r.CPU.Iperf3Client || r.OwnCPUPerGbps <= 0 ||
			r.Iperf.SenderCongestion != "cubic" {
			t.Errorf("run %+v, iperf3 %+v", r, r.Iperf)
		}
		// The wire profile puts MTU-sized frames on the underlay; veth's
		// defaults let GSO super-packets through.
		switch r.Profile {
		case "wire":
			if r.UnderlayBytesPerPacket > 1600 {
				t.Errorf("%s in wire: %.0f bytes per packet on the underlay, want frames of at most an MTU", r.Variant, r.UnderlayBytesPerPacket)
			}
		case "gso":
			if r.UnderlayBytesPerPacket < 3000 {
				t.Errorf("%s in gso: %.0f bytes per packet on the underlay, want super-packets", r.Variant, r.UnderlayBytesPerPacket)
			}
		}
	}
	for _, s := range res.Summaries {
		if s.Variant == "vxlan" && (s.Reference != "plain" || s.Ratio == nil || *s.Ratio <= 0) {
			t.Errorf("vxlan summary: %+v", s)
		}
	}
	if res.Environment.VethDefaults != (Offloads{TSO: true, GSO: true, GRO: false}) {
		// Not wrong on another kernel, but then the gso profile means
		// something else: say so.
		t.Logf("veth defaults on this kernel: %s", res.Environment.VethDefaults)
	}
}

// TestRunLISPVariants runs the lisp and lisp-rtr variants with a lispd
// built from this tree, next to plain, plain-3 and vxlan: both come up through
// the mapping system and are measured in both profiles, the RTR's path
// included, their LISP-GPE aggregated by GRO in wire, and the targets are
// judged; lisp-xdp, in wire only, decapsulates in XDP ahead of GRO.
func TestRunLISPVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lispd and waits for it")
	}
	tr := newTestRun(t, "lisp", "plain", "plain-3", "vxlan", "lisp", "lisp-rtr", "lisp-xdp")
	tr.opts.Profiles, tr.opts.Repetitions = []string{"gso", "wire"}, 2
	tr.opts.Lispd = filepath.Join(t.TempDir(), "lispd")
	if out, err := exec.Command("go", "build", "-o", tr.opts.Lispd, "github.com/amptcp/amptcp/cmd/lispd").CombinedOutput(); err != nil {
		t.Fatalf("build lispd: %v\n%s", err, out)
	}
	res, err := Run(context.Background(), tr.opts)
	tr.checkClean()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Variants {
		if !v.Up {
			t.Errorf("%s did not come up: %s", v.Name, v.Error)
		}
	}
	want := map[string]string{"plain": "", "plain-3": "", "vxlan": "plain", "lisp": "plain", "lisp-rtr": "plain-3", "lisp-xdp": "plain"}
	measured := map[string]int{}
	for _, s := range res.Summaries {
		ref, ok := want[s.Variant]
		measured[s.Variant]++
		if !ok || s.Runs != 2 || s.Gbps <= 0 || s.Reference != ref || (ref != "") != (s.Ratio != nil) {
			t.Errorf("summary %+v", s)
		}
		// MTU-sized frames on the underlay, aggregated again before the
		// server: by GRO of LISP-GPE at the RTR and the ETR, or of the
		// inner TCP after decapsulation in XDP.
		if strings.HasPrefix(s.Variant, "lisp") && s.Profile == "wire" && s.BytesPerPacket < 3*1500 {
			t.Errorf("%s in wire: %.0f bytes per packet into the server, want GRO's super-packets", s.Variant, s.BytesPerPacket)
		}
		if s.Variant == "lisp" && s.Profile == "gso" && s.UnderlayBytesPerPacket < 3000 {
			t.Errorf("lisp in gso: %.0f bytes per packet on the underlay, want super-packets", s.UnderlayBytesPerPacket)
		}
	}
	for name := range want {
		if profiles := 2 - strings.Count(name, "xdp"); measured[name] != profiles {
			t.Errorf("%s measured in %d profiles, want %d", name, measured[name], profiles)
		}
	}
	for _, r := range res.Runs {
		if r.UnderlayPackets == 0 {
			t.Errorf("%s: no packet counted on the underlay", r.Variant)
		}
	}
	if len(res.Targets) != 8 { // throughput and CPU, of lisp and lisp-rtr, in both profiles
		t.Fatalf("targets: %+v", res.Targets)
	}
	for _, tg := range res.Targets {
		if tg.Status != Met && tg.Status != Missed {
			t.Errorf("target %+v not judged", tg)
		}
	}
	lispd := 0
	for _, what := range tr.pids {
		if strings.HasPrefix(what, "lispd") {
			lispd++
		}
	}
	if lispd != 10 {
		t.Errorf("%d lispds started, want a map-server and two xtrs per variant and an rtr: %v", lispd, tr.pids)
	}
}

// TestRunInterrupted cancels a run in its first iperf3 run: Run returns
// soon, says it was interrupted, and leaves nothing behind.
//
// Soon is well before the iperf3 run would have ended: a second or two
// (the programs get SIGTERM, then SIGKILL after 3 s), against a minute.
func TestRunInterrupted(t *testing.T) {
	tr := newTestRun(t, "int", "plain")
	tr.opts.Duration = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	started := tr.opts.Started
	tr.opts.Started = func(what string, pid int) {
		started(what, pid)
		if what == "iperf3 client" {
			time.AfterFunc(500*time.Millisecond, func() {
				cancelled <- time.Now()
				cancel()
			})
		}
	}
	res, err := Run(ctx, tr.opts)
	ended := time.Now()
	tr.checkClean()
	if err == nil || !strings.Contains(err.Error(), "interrupted") || res != nil {
		t.Errorf("Run = %v, %v; want an interruption", res, err)
	}
	select {
	case at := <-cancelled:
		if took := ended.Sub(at); took > 20*time.Second {
			t.Errorf("Run took %v after its cancellation", took)
		}
	default:
		t.Error("Run ended before its iperf3 client had run for half a second")
	}
}

// TestRunFirstPacket runs the first-packet bench with a lispd built from
// this tree, over short emulated links: every trial connects, cold and
// warm, no cold connection retransmits its SYN (held by r1's ITR, not
// dropped: a retransmission would wait a second, far above the links'
// round trips), r1 held and released a packet per trial, and nothing
// is left afterwards.
func TestRunFirstPacket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lispd and waits for it")
	}
	tr := newTestRun(t, "fp")
	o := FirstPacketOptions{EIDs: 8, ResolverRTT: 2 * time.Millisecond, PathRTT: 4 * time.Millisecond,
		Prefix: tr.opts.Prefix, LinkPrefix: tr.opts.LinkPrefix, Progress: tr.opts.Progress, Started: tr.opts.Started,
		Lispd: filepath.Join(t.TempDir(), "lispd")}
	if out, err := exec.Command("go", "build", "-o", o.Lispd, "github.com/amptcp/amptcp/cmd/lispd").CombinedOutput(); err != nil {
		t.Fatalf("build lispd: %v\n%s", err, out)
	}
	res, err := RunFirstPacket(context.Background(), o)
	tr.checkClean()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) != 8 || res.Failed != 0 || res.Retransmitted != 0 || (res.Target != Met && res.Target != Missed) {
		t.Errorf("result %+v", res)
	}
	for _, tl := range res.Trials {
		if tl.ColdMs <= 0 || tl.WarmMs <= 0 || tl.ResolverMs <= 0 {
			t.Errorf("trial %+v", tl)
		}
	}
	if res.Counters["held"] < 8 || res.Counters["released"] != res.Counters["held"] {
		t.Errorf("r1's held packets: %v", res.Counters)
	}
}
