package report

import (
	"math"
	"testing"
)

func TestMedianCIRank(t *testing.T) {
	// By hand: P(B ≤ j-1) for B ~ Binomial(n, ½) must stay ≤ 2.5 %.
	//   n=5:  P(B=0) = 1/32 = 3.1 %: none.
	//   n=6:  P(B=0) = 1/64 = 1.6 %, P(B≤1) = 7/64 = 10.9 %: j=1.
	//   n=10: P(B≤1) = 11/1024 = 1.1 %, P(B≤2) = 56/1024 = 5.5 %: j=2.
	//   n=20: P(B≤5) = 21700/2^20 = 2.07 %, P(B≤6) = 60460/2^20 = 5.8 %: j=6.
	// Le Boudec's table A.1 gives the same ranks for 6, 10 and 20.
	for _, c := range []struct{ n, j int }{{1, 0}, {5, 0}, {6, 1}, {8, 1}, {9, 2}, {10, 2}, {20, 6}} {
		if got := medianCIRank(c.n, Confidence); got != c.j {
			t.Errorf("medianCIRank(%d) = %d, want %d", c.n, got, c.j)
		}
	}
	// Large n: the normal approximation n/2 - 0.98·√n (Le Boudec) is
	// within one rank.
	if got, want := medianCIRank(10000, Confidence), 5000-98; math.Abs(float64(got-want)) > 1 {
		t.Errorf("medianCIRank(10000) = %d, want about %d", got, want)
	}
}

func TestDescribe(t *testing.T) {
	// Ten samples, unsorted; sorted: 1 2 3 4 5 6 7 8 9 100.
	s := Describe([]float64{9, 1, 100, 3, 5, 7, 2, 4, 6, 8})
	if s.N != 10 || s.Median != 5.5 || s.Mean != 14.5 || s.Min != 1 || s.Max != 100 {
		t.Errorf("Describe = %+v, want n 10, median 5.5, mean 14.5, min 1, max 100", s)
	}
	// j = 2: [x(2), x(9)] = [2, 9].
	if s.CILow == nil || s.CIHigh == nil || *s.CILow != 2 || *s.CIHigh != 9 {
		t.Errorf("CI = %v..%v, want 2..9", s.CILow, s.CIHigh)
	}
	odd := Describe([]float64{3, 1, 2})
	if odd.Median != 2 || odd.CILow != nil || odd.CIHigh != nil {
		t.Errorf("Describe(3 samples) = %+v, want median 2 and no CI", odd)
	}
	if e := Describe(nil); e.N != 0 || e.CILow != nil {
		t.Errorf("Describe(nil) = %+v", e)
	}
}
