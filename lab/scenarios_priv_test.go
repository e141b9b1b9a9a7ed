package lab

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
)

// shortDocScenario writes a scenario of docs/scenarios and its
// topology file, each with the edits given for it (a regular expression
// and its replacement, every one of which must match) and the lab name
// name, into a temporary directory, and loads the scenario.
func shortDocScenario(t *testing.T, name, scenarioFile string, edits map[string][][2]string) *scenario.Scenario {
	t.Helper()
	dir := t.TempDir()
	for file, edits := range edits {
		b, err := os.ReadFile(filepath.Join("..", "docs", "scenarios", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range append(edits, [2]string{`(?m)^name: .*$`, "name: " + name}) {
			re := regexp.MustCompile(e[0])
			if !re.Match(b) {
				t.Fatalf("%s has no %s to shorten", file, e[0])
			}
			b = re.ReplaceAll(b, []byte(e[1]))
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Load(filepath.Join(dir, scenarioFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runTestScenario runs s in a lab of its name with the test's binaries,
// taken down when the test ends, and returns its results and its
// progress; a failed run fails the test.
func runTestScenario(t *testing.T, s *scenario.Scenario, scenarioFile string) (*results.Results, string) {
	t.Helper()
	labOpts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, s.Name, labOpts)
	out := filepath.Join(t.TempDir(), "results")
	var progress bytes.Buffer
	err := RunScenario(context.Background(), s, RunOptions{Lab: labOpts, Out: out, Progress: &progress, ScenarioFile: scenarioFile})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	res, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	return res, progress.String()
}
