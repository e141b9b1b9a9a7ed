package cc

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSharedBottleneck's design: how many repetitions, and the least gap
// to uncoupled Reno (its median over them) that a coupled control must
// leave. Reno runs twice a repetition.
const (
	sharedReps       = 12
	sharedWVegasReps = 7
	sharedRenoGap    = 0.045
)

// TestSharedBottleneckDesign resamples the shares the rig measured
// (testdata/shared-bottleneck-runs.txt) to check that TestSharedBottleneck
// as designed tells a coupled control from an uncoupled one: a run of it
// with correct controls rarely fails, and a control that takes what
// uncoupled Reno takes rarely passes. It runs no network: a change of
// the design that makes the proof flaky, or blind, fails here first.
func TestSharedBottleneckDesign(t *testing.T) {
	pool := readShares(t, "testdata/shared-bottleneck-runs.txt")
	reno := pool["reno"]
	coupled := []string{LIA, OLIA, BALIA}
	for _, n := range append(coupled, "reno") {
		if len(pool[n]) < 30 {
			t.Fatalf("testdata has %d shares of %s, want at least 30", len(pool[n]), n)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(xs []float64) float64 { return xs[rng.IntN(len(xs))] }
	// gap is the test's statistic for a control whose runs come from xs.
	gap := func(renoMeans []float64, xs []float64) float64 {
		less := make([]float64, len(renoMeans))
		for i, r := range renoMeans {
			less[i] = r - draw(xs)
		}
		return median(less)
	}
	const trials = 4000
	var runsFailed, brokenPassed int
	for range trials {
		renoMeans := make([]float64, sharedReps)
		for i := range renoMeans {
			renoMeans[i] = (draw(reno) + draw(reno)) / 2
		}
		failed := false
		for _, n := range coupled {
			if gap(renoMeans, pool[n]) < sharedRenoGap {
				failed = true
			}
		}
		if failed {
			runsFailed++
		}
		if gap(renoMeans, reno) >= sharedRenoGap {
			brokenPassed++
		}
	}
	fail, pass := float64(runsFailed)/trials, float64(brokenPassed)/trials
	t.Logf("%d repetitions, gap at least %.3f: a run with correct controls fails %.3f, a control that behaves as uncoupled Reno passes %.3f",
		sharedReps, sharedRenoGap, fail, pass)
	if fail > 0.05 {
		t.Errorf("a run with correct controls fails %.3f of the time, want at most 0.05: the proof would be flaky", fail)
	}
	if pass > 0.02 {
		t.Errorf("an uncoupled control passes %.3f of the time, want at most 0.02: the proof would not see it", pass)
	}
}

// readShares reads the shares of each control from a file of lines
// "time control share...", # comments.
func readShares(t *testing.T, name string) map[string][]float64 {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float64{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if len(fs) < 3 {
			t.Fatalf("%s:%d: want a time, a control and shares", name, line)
		}
		for _, s := range fs[2:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", name, line, err)
			}
			out[fs[1]] = append(out[fs[1]], x)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
