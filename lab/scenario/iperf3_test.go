package scenario

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// An iperf3 flow is planned as one traffic flow of kind Iperf3 with the
// stream flows' defaults (an MPTCP upload), its own settings, and the
// variants' cc and pm=tcp applied as to the other stream flows.
func TestIperf3Flow(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	s, err := Parse([]byte(`topology: lab.yaml
flows:
  - {name: up, from: client, to: server, kind: iperf3, duration: 4s, cc: reno}
  - {name: down, from: client, to: server, kind: iperf3, duration: 1m, direction: download, protocol: tcp, cc: bbr, at: 5s}
variants:
  pm: [default, tcp]
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	plan := s.Plan(runs[0].Variant)
	up, down := plan[0].Traffic, plan[1].Traffic
	if len(up) != 1 || len(down) != 1 {
		t.Fatalf("plan %+v: want one traffic flow per iperf3 flow", plan)
	}
	want := traffic.Flow{ID: "up", Kind: traffic.Iperf3, Protocol: traffic.MPTCP, CongestionControl: "reno", Duration: 4 * time.Second}
	if up[0] != want {
		t.Errorf("up: %+v, want %+v", up[0], want)
	}
	want = traffic.Flow{ID: "down", Kind: traffic.Iperf3, Protocol: traffic.TCP, CongestionControl: "bbr", Direction: traffic.Download, Duration: time.Minute}
	if down[0] != want || plan[1].Port != BasePort+1 || plan[1].At.Duration != 5*time.Second {
		t.Errorf("down: %+v port %d at %v, want %+v on port %d at 5s", down[0], plan[1].Port, plan[1].At, want, BasePort+1)
	}
	if tcp := s.Plan(runs[1].Variant); tcp[0].Traffic[0].Protocol != traffic.TCP {
		t.Errorf("pm=tcp: the iperf3 flow is over %s", tcp[0].Traffic[0].Protocol)
	}
	// The iperf3 flow's client gets the variant's path manager, as a
	// saturated flow's does.
	for _, n := range s.TopologyFor(runs[0].Variant).Nodes {
		if n.Name == "client" && (n.PM == nil || n.PM.Policy != "default") {
			t.Errorf("client's pm %+v, want the variant's default", n.PM)
		}
	}
}

func TestIperf3Errors(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	bad := `topology: lab.yaml
flows:
  - {name: a, from: client, to: server, kind: iperf3, cc: cubic}
  - {name: b, from: client, to: server, kind: iperf3, duration: 2500ms, cc: cubic}
  - {name: c, from: client, to: server, kind: iperf3, duration: 500ms, cc: cubic, size: 1MiB}
  - {name: d, from: client, to: server, kind: iperf3, duration: 2s, rate: 1Mbit, direction: sideways, protocol: udp}
  - {name: e, from: client, to: ms, kind: iperf3, duration: 2s, cc: "cubic!"}
`
	_, err := Parse([]byte(bad), dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"flows[0].duration: an iperf3 flow needs a duration of whole seconds (iperf3 -t), at least 1s",
		"flows[1].duration: an iperf3 flow needs a duration of whole seconds",
		"flows[2].duration: an iperf3 flow needs a duration of whole seconds",
		"flows[2].kind: an iperf3 flow has a duration, not a size or a rate",
		"flows[3].kind: an iperf3 flow has a duration, not a size or a rate",
		`flows[3].direction: "sideways" is not one of upload, download`,
		`flows[3].protocol: "udp" is not one of mptcp, tcp`,
		"flows[3].cc: missing",
		`flows[4].to: "ms" is not a host`,
		`flows[4].cc: "cubic!" is not a congestion control name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "flows[4].duration") {
		t.Errorf("2s is a good iperf3 duration:\n%v", err)
	}
}

// TestCrosscheckScenario loads docs/scenarios/crosscheck.yaml and checks
// what docs/lab.md says of it: on one emulated path, the built-in
// saturated flow and then iperf3, both MPTCP uploads with cubic for 10 s,
// the second after the first has ended; three repetitions.
func TestCrosscheckScenario(t *testing.T) {
	s, err := Load("../../docs/scenarios/crosscheck.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3 repetitions", len(runs))
	}
	plan := s.Plan(runs[0].Variant)
	if len(plan) != 2 || plan[0].Kind != KindSaturated || plan[1].Kind != KindIperf3 {
		t.Fatalf("flows %+v: want a saturated flow, then iperf3", plan)
	}
	for _, p := range plan {
		f := p.Traffic[0]
		if f.Protocol != traffic.MPTCP || f.CongestionControl != "cubic" || f.Direction != traffic.Upload || f.Duration != 10*time.Second ||
			p.From != "client" || p.To != "server" {
			t.Errorf("flow %s: %+v from %s to %s, want a 10 s MPTCP upload with cubic from client to server", p.Name, f, p.From, p.To)
		}
	}
	if plan[1].At.Duration <= plan[0].At.Duration+plan[0].Traffic[0].Duration {
		t.Errorf("iperf3 starts at %v, before the saturated flow's end", plan[1].At)
	}
	emulated := 0
	for _, l := range s.Topo.Links {
		if l.Emulated() {
			emulated++
		}
	}
	if emulated != 1 {
		t.Errorf("%d emulated links, want the one path", emulated)
	}
}
