package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/bench/dataplane"
	"github.com/amptcp/amptcp/internal/doctor"
	"github.com/amptcp/amptcp/internal/doctor/doctortest"
	"github.com/amptcp/amptcp/lab/scenario"
)

// fakeMachine makes the commands look at m instead of this machine,
// until the test ends.
func fakeMachine(t *testing.T, m *doctortest.Machine) {
	t.Helper()
	t.Cleanup(func() { doctorSystem = doctor.Host })
	doctorSystem = m.System
}

// TestDoctor: doctor prints every check and exits 0 when everything
// required is there, 1 with the fix when not; -json says the same.
func TestDoctor(t *testing.T) {
	m := doctortest.Healthy()
	delete(m.Tools, "tshark")
	fakeMachine(t, m)
	code, out, errOut := runCmd("", "doctor")
	if code != 0 || !strings.Contains(out, "OK       mptcp       net.mptcp.enabled = 1\n") ||
		!strings.Contains(out, "WARN     tshark      tshark not found\n") ||
		!strings.Contains(out, "Everything required is here (1 warning).") {
		t.Errorf("doctor on a machine without tshark = %d, %q, %q", code, out, errOut)
	}

	m.Set("proc/sys/net/mptcp/enabled", "0")
	code, out, _ = runCmd("", "doctor")
	if code != 1 || !strings.Contains(out, "fix: sysctl -w net.mptcp.enabled=1") {
		t.Errorf("doctor with MPTCP disabled = %d, %q", code, out)
	}
	code, out, _ = runCmd("", "doctor", "-json")
	var r struct {
		OK     bool `json:"ok"`
		Checks []struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.OK || len(r.Checks) != len(doctor.Everything()) ||
		r.Checks[1].Name != "mptcp" || r.Checks[1].Status != "missing" {
		t.Errorf("doctor -json = %d, %+v (%v): %s", code, r, err, out)
	}
	if code, _, errOut := runCmd("", "doctor", "extra"); code != 2 || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("doctor extra = %d, %q", code, errOut)
	}
}

// TestLabStopsWithDoctorsMessage: lab run, lab up and bench dataplane
// check the machine first and stop, before building anything, with
// doctor's message when something they need is missing.
func TestLabStopsWithDoctorsMessage(t *testing.T) {
	m := doctortest.Healthy()
	m.Set("proc/sys/net/mptcp/enabled", "0")
	m.Probes["tcx"] = unix.EINVAL
	fakeMachine(t, m)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"lab", "run", "-o", dir + "/results", "-dir", dir, "-bin", dir, "../../docs/scenarios/cloud-access.yaml"},
		{"lab", "up", "-dir", dir, "-bin", dir, "../../docs/scenarios/cloud-access-topology.yaml"},
	} {
		code, _, errOut := runCmd("", args...)
		for _, want := range []string{
			"amptcp " + args[0] + " " + args[1] + ": this machine lacks what it needs (amptcp doctor checks everything):\n",
			"MISSING  mptcp       net.mptcp.enabled = 0\n",
			"fix: sysctl -w net.mptcp.enabled=1",
			"MISSING  tcx         attach a tc program with TCX: invalid argument\n",
		} {
			if code != 1 || !strings.Contains(errOut, want) {
				t.Errorf("%v = %d, %q; want 1 and %q", args, code, errOut, want)
			}
		}
		if strings.Contains(errOut, "results in") || strings.Contains(errOut, "nodes,") {
			t.Errorf("%v started: %q", args, errOut)
		}
	}
	code, _, errOut := runCmd("", "bench", "dataplane", "--variants", "plain,lisp")
	if code != 1 || !strings.Contains(errOut, "amptcp bench dataplane: this machine lacks") ||
		!strings.Contains(errOut, "MISSING  tcx") || strings.Contains(errOut, "MISSING  mptcp") {
		t.Errorf("bench dataplane = %d, %q; want 1 and tcx (not mptcp) missing", code, errOut)
	}
}

// TestLabChecks: a lab checks what its topology and scenario use.
func TestLabChecks(t *testing.T) {
	names := func(checks []doctor.Check) []string {
		var n []string
		for _, c := range checks {
			n = append(n, c.Name)
		}
		return n
	}
	for _, tt := range []struct {
		file string
		want []string
	}{
		// Hosts with path managers, xTRs, veth and emulated links;
		// cubic for the flows and the fidelity measurement.
		{"cloud-access.yaml", []string{"privileges", "netns", "mptcp", "mptcp-pm", "veth", "tun", "bpf", "tcx", "congestion"}},
		// iperf3 over MPTCP; hosts without path managers.
		{"crosscheck.yaml", []string{"privileges", "netns", "mptcp", "veth", "tun", "bpf", "tcx", "congestion", "iperf3", "mptcpize"}},
	} {
		s, err := scenario.Load("../../docs/scenarios/" + tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(labChecks(s.Topo, s)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: checks %v, want %v", tt.file, got, tt.want)
		}
	}
	opts := dataplane.Options{Variants: []string{"plain", "vxlan"}, Congestion: "reno"}
	if got, want := names(benchDataplaneChecks(&opts)), []string{"privileges", "netns", "veth", "vxlan", "congestion", "iperf3"}; !slices.Equal(got, want) {
		t.Errorf("bench dataplane plain,vxlan: checks %v, want %v", got, want)
	}
}
