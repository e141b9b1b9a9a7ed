package lab

import (
	"bytes"
	"testing"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/report"
)

// TestTEHoLSweep runs the head-of-line sweep of docs/te.md, shortened to
// its two ends (r4's ELP as close as r3's, and [LISP-TE]'s 150 ms one
// way), once each, with 4 s uploads, and the subsets of 3 and 4 ELPs:
// rule 1 keeps the fourth ELP where it is close and leaves it out where
// it is slow (its amptcp pm opens a subflow per ELP of the set: 4, then
// 3), and the subsets open their 3 and 4 subflows. It logs the sweep's
// table (lab report -hol): the goodputs of eight seconds on a shared
// machine are too noisy to assert.
func TestTEHoLSweep(t *testing.T) {
	testenv.RequireRoot(t)
	short := func(pm string) [][2]string {
		return [][2]string{
			{`(?m)^repetitions: 3$`, "repetitions: 1"},
			{`duration: 20s`, "duration: 4s"},
			{`(?m)^  failure: \[owd45, owd55, owd65, owd100, owd150\]$`, "  failure: [owd45, owd150]"},
			{`(?m)^  pm: \[.*\]$`, "  pm: [" + pm + "]"},
		}
	}
	rule := shortDocScenario(t, testenv.Prefix+"-holr", "te-hol-sweep.yaml", map[string][][2]string{
		"te-hol-sweep.yaml": short("amptcp"), "te-hol-sweep-topology.yaml": nil})
	subsets := shortDocScenario(t, testenv.Prefix+"-hols", "te-hol-sweep-subsets.yaml", map[string][][2]string{
		"te-hol-sweep-subsets.yaml": short("subflows 3, subflows 4"), "te-hol-sweep-all-topology.yaml": nil})
	ruleRes, _ := runTestScenario(t, rule, "te-hol-sweep.yaml")
	subRes, _ := runTestScenario(t, subsets, "te-hol-sweep-subsets.yaml")

	for _, r := range subRes.Runs {
		want := map[string]int{"subflows 3": 3, "subflows 4": 4}[r.Variant["pm"]]
		if got := subflowsOpen(subRes, r.ID); got != want {
			t.Errorf("%s (%s): %d subflows, want %d", r.ID, r.Variant.Name(), got, want)
		}
	}
	for _, r := range ruleRes.Runs {
		want := map[string]int{"owd45": 4, "owd150": 3}[r.Variant["failure"]]
		if got := subflowsOpen(ruleRes, r.ID); got != want {
			t.Errorf("%s (%s): rule 1's set gave %d subflows, want %d", r.ID, r.Variant.Name(), got, want)
		}
	}
	// Only the subsets of 3 and 4: the table's others are empty.
	pts, err := report.HoLSweep(ruleRes, subRes, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	report.WriteHoL(&b, pts)
	t.Logf("the sweep, shortened:\n%s", b.String())
}

// subflowsOpen is the most subflows the connections of a run had.
func subflowsOpen(res *report.Results, run string) int {
	n := 0
	for _, r := range res.Records[run] {
		n = max(n, int(r.Subflows))
	}
	return n
}
