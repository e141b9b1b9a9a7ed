package scenario

import (
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/topo"
)

// TestTEHoLScenarios loads the head-of-line A/B of docs/te.md: the same
// overlay and upload, rule 1 on in one and off in the other.
func TestTEHoLScenarios(t *testing.T) {
	for file, factor := range map[string]float64{"te-hol.yaml": 1.5, "te-hol-all.yaml": 0} {
		s, err := Load("../../docs/scenarios/" + file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		runs := s.Runs()
		if len(runs) != 3 {
			t.Errorf("%s: %d runs", file, len(runs))
		}
		p, err := topo.Compile(s.TopologyFor(runs[0].Variant), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got := *p.Node("ms").Lispd.TE.HeadOfLine.RTTFactor; got != factor {
			t.Errorf("%s: rtt-factor %v, want %v", file, got, factor)
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
