package lab

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/scenario"
)

// calibrationTopology is one path: client, router, server, both links
// emulated at 10 Mbit/s.
const calibrationTopology = `name: NAME
nodes:
  - {name: client, role: host}
  - {name: server, role: host}
  - {name: r, role: router}
links:
  - {name: up, ends: [client, r], rate: 10Mbit, delay: 2ms}
  - {name: down, ends: [r, server], rate: 10Mbit, delay: 2ms}
`

// TestCalibration fits the rate of the client's uplink so that a single
// TCP flow gets 4 Mbit/s (its links are 10): the calibration says so in
// meta.json and the progress, and the run's lab has the rate found, as
// its fidelity measures. A calibration whose flow does not cross its
// link fails with the reason.
func TestCalibration(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-cal"
	scen := `name: NAME
topology: lab.yaml
flows:
  - {name: f, from: client, to: server, kind: saturated, duration: 2s}
variants:
  pm: [tcp]
  cc: [cubic]
calibrate:
  - {link: up, param: rate, between: [1Mbit, 10Mbit], target: 4Mbit, tolerance: 0.1, figure: a test, runs: 1, steps: 8,
     flow: {from: client, to: server, kind: saturated, duration: 3s, cc: cubic}}
`
	dir := t.TempDir()
	for file, text := range map[string]string{"lab.yaml": calibrationTopology, "exp.yaml": scen,
		"wrong.yaml": strings.Replace(scen, "{from: client, to: server, kind: saturated, duration: 3s", "{from: server, to: client, kind: saturated, duration: 1s", 1)} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strings.ReplaceAll(text, "NAME", name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Load(filepath.Join(dir, "exp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, progress := runTestScenario(t, s, "exp.yaml")
	if len(res.Meta.Calibration) != 1 {
		t.Fatalf("meta.json's calibration %+v", res.Meta.Calibration)
	}
	c := res.Meta.Calibration[0]
	t.Logf("calibration: %s", c)
	if !c.Met || c.Error != "" || len(c.Steps) == 0 || c.Value < 3.5e6 || c.Value > 5.5e6 {
		t.Fatalf("calibration %+v: want a rate of about 4 Mbit/s (plus the headers), within 10 %%", c)
	}
	if last := c.Steps[len(c.Steps)-1]; math.Abs(last.Mean-4e6)/4e6 > 0.1 || last.Value != c.Value {
		t.Errorf("last step %+v, want within 10 %% of 4 Mbit/s at the value found", last)
	}
	if !strings.Contains(progress, "calibration of up rate: rate ") {
		t.Errorf("the progress does not say what the calibration found")
	}
	paths := res.Runs[0].Fidelity.Paths
	if len(paths) != 1 || math.Abs(paths[0].RateWant-c.Value*1448/1514) > 0.03*c.Value {
		t.Errorf("the run's path %+v, want the calibrated rate's payload, %.2f Mbit/s", paths, c.Value*1448/1514/1e6)
	}

	// The flow from the server to the client takes "up" the other way:
	// calibrating it is measuring another path.
	wrong, err := scenario.Load(filepath.Join(dir, "wrong.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wrong.Calibrate[0].Direction = "a-to-b"
	res, _ = runTestScenario(t, wrong, "wrong.yaml")
	if c := res.Meta.Calibration[0]; !strings.Contains(c.Error, "did not cross link up") {
		t.Errorf("a calibration flow off its link: %+v", c)
	}
}
