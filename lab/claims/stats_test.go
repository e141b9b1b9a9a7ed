package claims

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestMeanInterval: 1..5 has mean 3, standard deviation 1.5811 and
// t(4, 0.975) = 2.776445, so the interval is 3 ± 1.9632.
func TestMeanInterval(t *testing.T) {
	iv := meanInterval([]float64{1, 2, 3, 4, 5})
	if !near(iv.Value, 3, 1e-12) || !near(iv.Low, 1.03676, 1e-4) || !near(iv.High, 4.96324, 1e-4) {
		t.Errorf("interval %+v, want 3 (1.0368 to 4.9632)", iv)
	}
	if one := meanInterval([]float64{7}); one.Value != 7 || one.HasInterval() {
		t.Errorf("one sample: %+v, want 7 without an interval", one)
	}
}

// TestRatioInterval: a ratio of equal samples is 1 with an interval
// symmetric on the log scale; doubling one sample doubles the ratio and
// its ends.
func TestRatioInterval(t *testing.T) {
	x := []float64{9, 10, 11, 10}
	iv := ratioInterval(x, x)
	if !near(iv.Value, 1, 1e-12) || !near(math.Log(iv.High), -math.Log(iv.Low), 1e-12) || iv.Low >= 1 {
		t.Errorf("ratio of equal samples %+v", iv)
	}
	y := []float64{18, 20, 22, 20}
	iv2 := ratioInterval(y, x)
	if !near(iv2.Value, 2, 1e-12) || !near(iv2.Low, 2*iv.Low, 1e-9) || !near(iv2.High, 2*iv.High, 1e-9) {
		t.Errorf("ratio %+v, want twice %+v", iv2, iv)
	}
	if z := ratioInterval(x, []float64{0, 0}); !math.IsNaN(z.Value) {
		t.Errorf("ratio over a mean of zero: %+v, want none", z)
	}
}

// TestDifferenceInterval: Welch's interval for 1..4 against 2, 4, .., 10
// (means 2.5 and 6, variances of the means 0.41667 and 2, 5.52 degrees
// of freedom, t = 2.4994): -3.5 ± 3.886.
func TestDifferenceInterval(t *testing.T) {
	iv := differenceInterval([]float64{1, 2, 3, 4}, []float64{2, 4, 6, 8, 10})
	if !near(iv.Value, -3.5, 1e-12) || !near(iv.High-iv.Value, 3.886, 0.01) || !near(iv.Value-iv.Low, iv.High-iv.Value, 1e-9) {
		t.Errorf("difference %+v, want -3.5 ± 3.886", iv)
	}
}

// TestMedianInterval: 10 samples give [x(2), x(9)] (Le Boudec, table
// A.1), 5 none.
func TestMedianInterval(t *testing.T) {
	iv := medianInterval([]float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5})
	if iv.Value != 5.5 || iv.Low != 2 || iv.High != 9 {
		t.Errorf("median interval %+v, want 5.5 (2 to 9)", iv)
	}
	if iv := medianInterval([]float64{1, 2, 3, 4, 5}); iv.HasInterval() {
		t.Errorf("5 samples: %+v, want no interval", iv)
	}
}

// TestShareInterval: Wilson's interval of 8 of 10 is 0.490 to 0.943.
func TestShareInterval(t *testing.T) {
	iv := shareInterval(8, 10)
	if iv.Value != 0.8 || !near(iv.Low, 0.4902, 1e-3) || !near(iv.High, 0.9433, 1e-3) {
		t.Errorf("share %+v, want 0.8 (0.490 to 0.943)", iv)
	}
}

// TestSpearman: 1..5 against 2, 1, 4, 3, 5 has d² summing to 4, so rho
// = 1 - 6·4/(5·24) = 0.8; ties get their mean rank.
func TestSpearman(t *testing.T) {
	if iv := spearman([]float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}); !near(iv.Value, 0.8, 1e-12) || !iv.HasInterval() || iv.Low > 0.8 || iv.High < 0.8 {
		t.Errorf("rho %+v, want 0.8 inside its interval", iv)
	}
	if r := ranks([]float64{3, 1, 3, 2}); r[0] != 3.5 || r[1] != 1 || r[2] != 3.5 || r[3] != 2 {
		t.Errorf("ranks %v, want [3.5 1 3.5 2]", r)
	}
	if iv := spearman([]float64{1, 2, 3, 4, 5, 6}, []float64{6, 5, 4, 3, 2, 1}); iv.Value != -1 {
		t.Errorf("decreasing: rho %v, want -1", iv.Value)
	}
}

// TestMannWhitneyExactAgainstEnumeration checks the exact p-value
// against the share of all splits of the pooled samples whose U is as
// far from its mean, counted one by one.
func TestMannWhitneyExactAgainstEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		n1, n2 := 2+rng.IntN(4), 2+rng.IntN(5)
		all := rng.Perm(n1 + n2)
		x, y := make([]float64, n1), make([]float64, n2)
		for i := range x {
			x[i] = float64(all[i])
		}
		for i := range y {
			y[i] = float64(all[n1+i])
		}
		got := mannWhitney(x, y)
		want := enumerateMW(x, y)
		if !near(got, want, 1e-9) {
			t.Errorf("trial %d: %v vs %v: p %v, enumeration %v", trial, x, y, got, want)
		}
	}
	if p := mannWhitney([]float64{1, 2, 3}, []float64{4, 5, 6}); !near(p, 0.1, 1e-12) {
		t.Errorf("1,2,3 against 4,5,6: p %v, want 2/20", p)
	}
}

// enumerateMW is the two-sided p-value by every split of the values.
func enumerateMW(x, y []float64) float64 {
	all := append(append([]float64{}, x...), y...)
	n1, n := len(x), len(all)
	u := func(a, b []float64) float64 {
		s := 0.0
		for _, p := range a {
			for _, q := range b {
				if p > q {
					s++
				}
			}
		}
		return s
	}
	mu := float64(n1*(n-n1)) / 2
	obs := math.Abs(u(x, y) - mu)
	hits, total := 0, 0
	for mask := 0; mask < 1<<n; mask++ {
		var a, b []float64
		for i := range n {
			if mask&(1<<i) != 0 {
				a = append(a, all[i])
			} else {
				b = append(b, all[i])
			}
		}
		if len(a) != n1 {
			continue
		}
		total++
		if math.Abs(u(a, b)-mu) >= obs-1e-9 {
			hits++
		}
	}
	return float64(hits) / float64(total)
}

// TestMannWhitneyApproximation: with ties the normal approximation is
// used; samples far apart give a small p, the same samples p = 1.
func TestMannWhitneyApproximation(t *testing.T) {
	x := []float64{1, 1, 2, 2, 3, 3, 4, 4, 5, 5}
	y := []float64{11, 11, 12, 12, 13, 13, 14, 14, 15, 15}
	if p := mannWhitney(x, y); p > 0.001 {
		t.Errorf("far apart: p %v, want < 0.001", p)
	}
	if p := mannWhitney(x, x); p < 0.9 {
		t.Errorf("the same samples: p %v, want about 1", p)
	}
}

// TestBootstrapSpread: group means 10 and 12 spread by 1.2, inside an
// interval the fixed seed makes the same each time.
func TestBootstrapSpread(t *testing.T) {
	groups := [][]float64{{9, 10, 11}, {11, 12, 13}}
	a, b := bootstrapSpread(groups), bootstrapSpread(groups)
	if !near(a.Value, 1.2, 1e-12) || !a.HasInterval() || a.Low > 1.2 || a.High < 1.2 || a != b {
		t.Errorf("spread %+v then %+v, want 1.2 inside the same interval twice", a, b)
	}
	if iv := bootstrapSpread([][]float64{{1}, {2, 3}}); iv.HasInterval() {
		t.Errorf("a group of one: %+v, want no interval", iv)
	}
}
