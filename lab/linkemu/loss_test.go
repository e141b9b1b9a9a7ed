package linkemu

import (
	"math"
	"testing"
)

// draws runs n frames through l and returns the loss rate and the mean
// length of runs of consecutive losses.
func draws(l Loss, n int) (rate, meanRun float64) {
	s := newLossState(42, AToB)
	lost, runs, inRun := 0, 0, false
	for range n {
		if s.lose(&l) {
			lost++
			if !inRun {
				runs++
			}
			inRun = true
		} else {
			inRun = false
		}
	}
	if runs == 0 {
		return 0, 0
	}
	return float64(lost) / float64(n), float64(lost) / float64(runs)
}

// within checks got against want with the tolerance of k standard
// deviations of a proportion over n draws.
func within(t *testing.T, what string, got, want float64, n int) {
	t.Helper()
	sd := math.Sqrt(want * (1 - want) / float64(n))
	if math.Abs(got-want) > 5*sd {
		t.Errorf("%s = %.5f, want %.5f ± %.5f", what, got, want, 5*sd)
	}
}

func TestBernoulliLossRate(t *testing.T) {
	const n = 200000
	for _, p := range []float64{0, 0.01, 0.1, 0.5, 1} {
		rate, meanRun := draws(Loss{P: p}, n)
		within(t, "loss rate", rate, p, n)
		// Independent losses: runs are geometric with mean 1/(1-p).
		if p > 0 && p < 1 && math.Abs(meanRun-1/(1-p)) > 0.05/(1-p) {
			t.Errorf("p=%g: mean loss run %.3f, want %.3f", p, meanRun, 1/(1-p))
		}
	}
}

func TestGilbertElliottStatistics(t *testing.T) {
	const n = 1000000
	for _, tc := range []struct {
		name string
		l    Loss
	}{
		// Classic Gilbert: losses only in the bad state, bad runs of
		// 1/R = 4 frames, bad 1/(1+R/P) = 1.96 % of the time.
		{"gilbert", Loss{Model: GilbertElliott, P: 0.005, R: 0.25, LossBad: 1}},
		{"lossy both states", Loss{Model: GilbertElliott, P: 0.02, R: 0.1, LossGood: 0.01, LossBad: 0.6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, meanRun := draws(tc.l, n)
			// Correlated draws: a wider tolerance than the binomial one.
			want := tc.l.Rate()
			if math.Abs(rate-want) > 0.06*want {
				t.Errorf("loss rate %.5f, want %.5f within 6 %%", rate, want)
			}
			if tc.l.LossGood == 0 && tc.l.LossBad == 1 {
				// Every bad run is a loss run of mean 1/R.
				if want := 1 / tc.l.R; math.Abs(meanRun-want) > 0.05*want {
					t.Errorf("mean loss run %.3f, want %.3f", meanRun, want)
				}
			}
			// Bursty: runs longer than independent losses of the
			// same rate would give.
			if meanRun <= 1/(1-want) {
				t.Errorf("mean loss run %.3f is no burstier than Bernoulli's %.3f", meanRun, 1/(1-want))
			}
		})
	}
}

func TestLossIsRepeatable(t *testing.T) {
	l := Loss{Model: GilbertElliott, P: 0.1, R: 0.3, LossBad: 0.8}
	a, b := newLossState(7, BToA), newLossState(7, BToA)
	for i := range 10000 {
		if a.lose(&l) != b.lose(&l) {
			t.Fatalf("frame %d: two chains with the same seed disagree", i)
		}
	}
}
