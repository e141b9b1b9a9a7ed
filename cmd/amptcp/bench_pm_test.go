package main

import (
	"encoding/json"
	"strings"
	"testing"

	benchpm "github.com/amptcp/amptcp/bench/pm"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestBenchPMArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "pm", "--variants", "amptcp-pm,mptcpd"}, `unknown variant "mptcpd"`},
		{[]string{"bench", "pm", "--failures", ","}, "invalid value \",\" for flag -failures: empty list"},
		{[]string{"bench", "pm", "--failures", "fire"}, `unknown failure "fire" (link, blackhole)`},
		{[]string{"bench", "pm", "--repetitions", "0"}, "must be positive"},
		{[]string{"bench", "pm", "--outage", "0s"}, "must be positive"},
		{[]string{"bench", "pm", "--timeout", "100ms"}, "timeout: 100ms is not between 1s and 10m"},
		{[]string{"bench", "pm", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := runCmd("", tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v = %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	code, _, errOut := runCmd("", "bench", "pm", "--help")
	if code != 0 || !strings.Contains(errOut, "The defaults make 40 repairs and take about 2 minutes") || !strings.Contains(errOut, "-outage D") {
		t.Errorf("bench pm --help = %d, %q", code, errOut)
	}
	if code, out, _ := runCmd("", "bench", "--help"); code != 0 || !strings.Contains(out, "amptcp bench pm [--json]") {
		t.Errorf("bench --help = %d, %q", code, out)
	}
	if code, out, _ := runCmd("", "help"); code != 0 || !strings.Contains(out, "pm (repairs)") {
		t.Errorf("help = %d, %q", code, out)
	}
}

// TestBenchPM runs one repetition of every path manager and failure, with
// JSON output: each was measured, amptcp pm got its subflows back after
// each failure, and nothing is left behind. How fast is the bench's
// report, not this test's.
func TestBenchPM(t *testing.T) {
	testenv.RequireRoot(t)
	code, out, errOut := runCmd("", "bench", "pm", "--json", "--repetitions", "1", "--outage", "1s")
	if code != 0 {
		t.Fatalf("bench pm = %d\n%s", code, errOut)
	}
	t.Logf("progress:\n%s", errOut)
	var res benchpm.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not a result: %v\n%s", err, out)
	}
	if len(res.Samples) != 4 || len(res.Summaries) != 4 || len(res.Targets) != 4 {
		t.Fatalf("%d samples, %d summaries, %d targets, want 4 of each:\n%s", len(res.Samples), len(res.Summaries), len(res.Targets), out)
	}
	for _, s := range res.Samples {
		if s.Error != "" {
			t.Errorf("%s, %s: not measured: %s", s.Failure, s.Variant, s.Error)
		}
		if s.Variant == benchpm.VariantAMPTCP && (!s.Recovered || s.RepairMS <= 0) {
			t.Errorf("%s: amptcp pm did not get the subflows back: %+v", s.Failure, s)
		}
	}
	for _, want := range []string{"setting up amptcp-pm", "setting up kernel", "[4/4] repetition 1, blackhole, kernel: "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	if names, _ := netns.List(res.Environment.Prefix); len(names) > 0 {
		t.Errorf("namespaces left: %v", names)
	}
}
