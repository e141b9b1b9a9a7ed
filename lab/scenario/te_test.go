package scenario

import (
	"testing"

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
