package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/bench/maprequest"
)

// TestMain lets the test binary stand in for amptcp when the bench starts
// its reference server as `<this executable> bench echo-server`.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "echo-server" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestBenchArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench"}, 2, "usage: amptcp bench map-request"},
		{[]string{"bench", "frobnicate"}, 2, `unknown benchmark "frobnicate"`},
		{[]string{"bench", "map-request", "--prefixes", "0"}, 2, "must be positive"},
		{[]string{"bench", "map-request", "--duration", "-1s"}, 2, "must be positive"},
		{[]string{"bench", "map-request", "--window", "many"}, 2, `invalid value "many" for flag -window`},
		{[]string{"bench", "map-request", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"bench", "map-request", "--prefixes", "20000000"}, 2, "prefixes: 20000000 is not between 1 and 10000000"},
		{[]string{"bench", "map-request", "--lispd", "/nonexistent/lispd"}, 1, "find lispd"},
		{[]string{"bench", "echo-server", "-reply-size", "3", "-notify-size", "84"}, 2, "reply sizes 3 and 84"},
		{[]string{"bench", "echo-server", "-reply-size", "40", "-notify-size", "84", "-listen", "nowhere"}, 2, "-listen nowhere"},
	} {
		code, _, errOut := runCmd("", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v = %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	if code, out, _ := runCmd("", "bench", "--help"); code != 0 || !strings.Contains(out, "--prefixes N") {
		t.Errorf("bench --help = %d, %q", code, out)
	}
}

// TestBenchMapRequest runs a short benchmark against a lispd built for the
// test. It checks that every phase measured something coherent, not how
// fast: this machine's speed is no property of the code.
func TestBenchMapRequest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the benchmark needs Linux")
	}
	if testing.Short() {
		t.Skip("builds lispd and runs it for a few seconds")
	}
	lispd := filepath.Join(t.TempDir(), "lispd")
	if out, err := exec.Command("go", "build", "-o", lispd, "github.com/amptcp/amptcp/cmd/lispd").CombinedOutput(); err != nil {
		t.Fatalf("build lispd: %v\n%s", err, out)
	}
	const prefixes = 2000
	profiles := t.TempDir()
	code, out, errOut := runCmd("", "bench", "map-request", "--lispd", lispd,
		"--prefixes", "2000", "--duration", "500ms", "--profile", profiles, "--json")
	if code != 0 {
		t.Fatalf("bench map-request = %d\n%s", code, errOut)
	}
	var res maprequest.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not a result: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	reg := res.MapRegister
	// The refresh: the same Map-Registers again, each accepted, none
	// creating a registration.
	for name, reg := range map[string]maprequest.RegisterResult{"map_register": reg, "map_register_refresh": res.MapRefresh} {
		if res.Prefixes != prefixes || reg.Count != prefixes || reg.Accepted < uint64(prefixes) || reg.Accepted > uint64(prefixes+reg.Resent) ||
			reg.Registered != prefixes || reg.PerSecond <= 0 || reg.TargetRatio != 0.8 ||
			reg.ReferencePerSecond <= 0 || reg.NotifyBytes == 0 || reg.NotifyBytes != reg.ReferenceNotifyBytes ||
			reg.ServerCPU < 0 || reg.ReferenceServerCPU < 0 || len(reg.TurnRatios) != 10 { // CPU is counted in ticks: a phase of 20 ms may show none
			t.Errorf("%s: %+v", name, reg)
		}
	}
	req := res.MapRequest
	for _, l := range []maprequest.Load{req.Lispd, req.Reference} {
		if l.PerSecond <= 0 || l.Lost > l.Replies/100 || l.Negative != 0 || l.Unmatched != 0 || l.ReplyBytes == 0 {
			t.Errorf("map_request: %+v", l)
		}
	}
	if req.MaxPerSecond != req.Lispd.PerSecond || req.ReferencePerSecond != req.Reference.PerSecond ||
		req.Lispd.ReplyBytes != req.Reference.ReplyBytes ||
		req.RatioToReference <= 0 || req.TargetRatio != 0.9 {
		t.Errorf("map_request: %+v", req)
	}
	lat := res.Latency
	for _, l := range []maprequest.OpenLoad{lat.OpenLoad, lat.Reference} {
		if l.Samples == 0 || !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) || l.PerSecond <= 0 {
			t.Errorf("latency: %+v", l)
		}
	}
	turns := func(r []float64) bool { return len(r) >= 1 && len(r) <= 10 } // a turn the reference did not answer is left out
	if lat.Rate != req.MaxPerSecond/2 || lat.TargetP99Ratio != 2 || lat.P99Ratio <= 0 || !turns(lat.TurnRatios) ||
		!turns(req.TurnRatios) {
		t.Errorf("latency at %v, p99 ratio %v, target %v; want half of %v and 2", lat.Rate, lat.P99Ratio, lat.TargetP99Ratio, req.MaxPerSecond)
	}
	if lat.P99Ratio != lat.P99/lat.Reference.P99 || lat.MedianTurnRatio <= 0 || len(lat.TurnP99) != 10 || len(lat.Reference.TurnP99) != 10 {
		t.Errorf("p99 ratio %v of %v and %v, median of the turns' %v, turns' p99 %v and %v", lat.P99Ratio, lat.P99, lat.Reference.P99,
			lat.MedianTurnRatio, lat.TurnP99, lat.Reference.TurnP99)
	}
	if mem := res.Memory; mem.HeapBytesPerPrefix <= 0 || mem.RSSBytesPerPrefix <= 0 || mem.HeapAfter <= mem.HeapBefore {
		t.Errorf("memory: %+v", mem)
	}
	if env := res.Environment; env.Lispd != lispd || env.LispdPinning == "" || env.Kernel == "" || env.CPUs < 1 {
		t.Errorf("environment: %+v", env)
	}
	var phases []string
	for _, p := range res.Profiles {
		phases = append(phases, p.Phase)
		for _, f := range []string{p.CPU, p.Trace, p.AllocsBefore, p.Allocs} {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 || filepath.Dir(f) != profiles {
				t.Errorf("profile of %s: %s: %v", p.Phase, f, err)
			}
		}
	}
	if got := strings.Join(phases, " "); got != "register refresh request-max request-latency" {
		t.Errorf("profiles of %q", got)
	}
	for _, phase := range []string{"registering 2000 prefixes", "refreshed 2000 registrations", "in 10 turns", "open loop"} {
		if !strings.Contains(errOut, phase) {
			t.Errorf("progress lacks %q:\n%s", phase, errOut)
		}
	}
}
