package scenario

import (
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/topo"
)

// TestTEHoLSweepRegimes loads the head-of-line sweep's other scenarios:
// rule 2 (the capacity model) in place of rule 1, and the three on hosts
// whose TCP buffers are 1 MiB, with rule 2 told so.
func TestTEHoLSweepRegimes(t *testing.T) {
	for file, want := range map[string]struct {
		factor  float64
		window  string // rule 2's receive window, "" when the capacities are not given
		buffers string
	}{
		"te-hol-sweep-capacity.yaml":    {0, "6MiB", ""},
		"te-hol-sweep-1m.yaml":          {1.5, "", "1MiB"},
		"te-hol-sweep-subsets-1m.yaml":  {0, "", "1MiB"},
		"te-hol-sweep-capacity-1m.yaml": {0, "1MiB", "1MiB"},
	} {
		s, err := Load("../../docs/scenarios/" + file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		runs := s.Runs()
		top := s.TopologyFor(runs[0].Variant)
		p, err := topo.Compile(top, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		hol := p.Node("ms").Lispd.TE.HeadOfLine
		rule2 := len(hol.Capacities) == 8
		if *hol.RTTFactor != want.factor || rule2 != (want.window != "") || rule2 && hol.ReceiveWindow != want.window {
			t.Errorf("%s: head-of-line %+v", file, hol)
		}
		if want.factor == 0 && (hol.MaxSpread == nil || hol.MaxSpread.Duration != 0) {
			t.Errorf("%s: rule 1's spread bound %v, want it off", file, hol.MaxSpread)
		}
		if top.Hosts.TCPBuffers != want.buffers {
			t.Errorf("%s: hosts' buffers %q, want %q", file, top.Hosts.TCPBuffers, want.buffers)
		}
	}
}

// TestTEHoLSweepScenarios loads the head-of-line sweep of docs/te.md:
// rule 1 on, and the subsets of 1 to 4 ELPs with it off, at the same
// five points, each bringing r4's link to its delay at the start of the
// run.
func TestTEHoLSweepScenarios(t *testing.T) {
	for file, want := range map[string]struct {
		factor float64
		runs   int
	}{"te-hol-sweep.yaml": {1.5, 15}, "te-hol-sweep-subsets.yaml": {0, 60}} {
		s, err := Load("../../docs/scenarios/" + file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		runs := s.Runs()
		if len(runs) != want.runs {
			t.Errorf("%s: %d runs, want %d", file, len(runs), want.runs)
		}
		p, err := topo.Compile(s.TopologyFor(runs[0].Variant), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		te := p.Node("ms").Lispd.TE
		if *te.HeadOfLine.RTTFactor != want.factor || te.Hysteresis.Confirm != 1 || te.Hysteresis.HoldDown.Duration != time.Second || te.MaxHops != 2 {
			t.Errorf("%s: te %+v", file, te)
		}
		ev := s.Events(runs[0].Variant)
		if len(ev) != 1 || ev[0].Link != "r4-core" || ev[0].Delay != "20.5ms" || ev[0].At.Duration != 0 {
			t.Errorf("%s: the first run's events %+v, want r4's link at 20.5 ms", file, ev)
		}
	}
}
