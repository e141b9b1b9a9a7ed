package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/bench/dataplane"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestBenchDataplaneArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "dataplane", "--variants", "plain,gre"}, 2, `unknown variant "gre"`},
		{[]string{"bench", "dataplane", "--variants", ","}, 2, "invalid value \",\" for flag -variants: empty list"},
		{[]string{"bench", "dataplane", "--profiles", "jumbo"}, 2, `unknown profile "jumbo"`},
		{[]string{"bench", "dataplane", "--streams", "1,x"}, 2, `"x" is not a number`},
		{[]string{"bench", "dataplane", "--streams", "0"}, 2, "streams: 0 is not between 1 and 128"},
		{[]string{"bench", "dataplane", "--duration", "1500ms"}, 2, "whole number of seconds"},
		{[]string{"bench", "dataplane", "--duration", "0s"}, 2, "must be positive"},
		{[]string{"bench", "dataplane", "--repetitions", "0"}, 2, "must be positive"},
		{[]string{"bench", "dataplane", "--setup-timeout", "-1s"}, 2, "must be positive"},
		{[]string{"bench", "dataplane", "--duration", "2h"}, 2, "duration: 2h0m0s is not a whole number of seconds between 1s and 1h"},
		{[]string{"bench", "dataplane", "extra"}, 2, `unexpected argument "extra"`},
	} {
		code, _, errOut := runCmd("", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v = %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	code, _, errOut := runCmd("", "bench", "dataplane", "--help")
	if code != 0 || !strings.Contains(errOut, "The defaults make 60 iperf3 runs and take about 12 minutes") ||
		!strings.Contains(errOut, "-variants variants") {
		t.Errorf("bench dataplane --help = %d, %q", code, errOut)
	}
	if code, out, _ := runCmd("", "bench", "--help"); code != 0 || !strings.Contains(out, "amptcp bench dataplane [--json]") {
		t.Errorf("bench --help = %d, %q", code, out)
	}
}

// TestBenchDataplane runs the bench for a second on plain routing, with
// JSON output, and a lisp variant whose lispd cannot be found: that one
// is reported, the run goes on.
func TestBenchDataplane(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "iperf3")
	code, out, errOut := runCmd("", "bench", "dataplane", "--json", "--variants", "plain,lisp", "--profiles", "gso",
		"--streams", "2", "--duration", "1s", "--repetitions", "1", "--lispd", "/nonexistent/lispd")
	if code != 0 {
		t.Fatalf("bench dataplane = %d\n%s", code, errOut)
	}
	var res dataplane.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not a result: %v\n%s", err, out)
	}
	if len(res.Runs) != 1 || res.Runs[0].Gbps <= 0 || res.Runs[0].Streams != 2 || res.Runs[0].Iperf.Streams != 2 {
		t.Errorf("runs: %+v", res.Runs)
	}
	if v := res.Variants[1]; v.Up || !strings.Contains(v.Error, "find lispd") {
		t.Errorf("lisp: %+v", v)
	}
	for _, want := range []string{"setting up plain", "lisp did not come up: find lispd", "[1/1] repetition 1, gso, plain, 2 streams"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, errOut)
		}
	}
	if names, _ := netns.List(res.Environment.Prefix); len(names) > 0 {
		t.Errorf("namespaces left: %v", names)
	}
}
