package lab

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/scenario"
)

// TestPaperScenarioClaims runs the short version of a paper's scenario
// of docs/scenarios ([MPTCP-failures]' aggregation over 8 links), cut to
// one repetition of 4 s flows, end to end, and checks that its claims
// are evaluated, not their values: each has a verdict; the stand-in's
// with a value; one on a variant the short version does not run is NOT
// RUN with the reason; and the runner prints them.
func TestPaperScenarioClaims(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.ExclusiveCongestionControls(t) // failures-aggregation's amp_lia
	before := liaTokens(t)
	name := testenv.Prefix + "-claims"
	edits := map[string][][2]string{
		"failures-aggregation.yaml": {{`(?m)^  repetitions: 2$`, "  repetitions: 1"}, {`duration: 10s`, "duration: 4s"}},
		"failures-topology.yaml":    {},
	}
	full := shortDocScenario(t, name, "failures-aggregation.yaml", edits)
	s, err := scenario.LoadVersion(filepath.Join(filepath.Dir(full.TopologyPath), "failures-aggregation.yaml"), true)
	if err != nil {
		t.Fatal(err)
	}
	res, progress := runTestScenario(t, s, "failures-aggregation.yaml")
	if !res.Meta.Short {
		t.Errorf("meta.json does not say the short version ran")
	}
	list, err := claims.FromScenario([]byte(res.Meta.ScenarioSource))
	if err != nil {
		t.Fatal(err)
	}
	rs := claims.Evaluate(res, list)
	if len(rs) != 3 {
		t.Fatalf("%d claims evaluated, want 3", len(rs))
	}
	byID := map[string]claims.Result{}
	for _, r := range rs {
		if r.Verdict != claims.Pass && r.Verdict != claims.Fail && r.Verdict != claims.NotRun {
			t.Errorf("claim %s: verdict %q", r.ID, r.Verdict)
		}
		byID[r.ID] = r
	}
	if r := byID["002-a cubic"]; r.Verdict == claims.NotRun || r.Value == nil || r.N != 1 || r.NOver != 1 {
		t.Errorf("002-a cubic: %+v, want a value from a run of each", r)
	}
	if r := byID["002-a queue 20"]; r.Verdict != claims.NotRun || !strings.Contains(r.Reason, "no run of") {
		t.Errorf("002-a queue 20: %+v, want NOT RUN: the short version has no such run", r)
	}
	if r := byID["002-a"]; r.Verdict == claims.NotRun && !strings.Contains(r.Reason, "congestion control amp_lia is not available") {
		t.Errorf("002-a (amp_lia): not run for %q, want the missing congestion control named", r.Reason)
	}
	if !strings.Contains(progress, "Claims: ") || !strings.Contains(progress, "002-a cubic") {
		t.Errorf("the progress does not end with the claims")
	}
	for _, run := range res.Runs {
		if run.Variant["cc"] == "amp_lia" && run.Skipped == "" && run.Error != "" {
			t.Errorf("run %s with amp_lia failed (%s) instead of being skipped", run.ID, run.Error)
		}
	}
	// A saturated upload ends with its data still queued, so its
	// connection outlives its processes, over links the lab then
	// deletes: the lab resets it as it goes down, and none of the runs'
	// connections stays in amp_lia's map (what another test left may).
	waitUntil(t, "amp_lia's connections to end with the labs", 10*time.Second, func() bool {
		return len(slices.DeleteFunc(liaTokens(t), func(tok uint32) bool { return slices.Contains(before, tok) })) == 0
	})
}

// liaTokens are the tokens of the connections in amp_lia's maps.
func liaTokens(t *testing.T) []uint32 {
	t.Helper()
	st, err := cc.ReadStatus()
	if err != nil {
		t.Fatal(err)
	}
	var tokens []uint32
	for _, c := range st.Controls {
		if c.Name == cc.LIA {
			for _, conn := range c.Connections {
				tokens = append(tokens, conn.Token)
			}
		}
	}
	return tokens
}
