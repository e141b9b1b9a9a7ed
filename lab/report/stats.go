package report

import (
	"math"
	"slices"
)

// Confidence is the level of the confidence intervals.
const Confidence = 0.95

// Stats is the distribution of one metric's samples.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// CILow and CIHigh bound the median with 95 % confidence; both are
	// nil when there are too few samples for one (fewer than 6).
	CILow  *float64 `json:"ci_low,omitempty"`
	CIHigh *float64 `json:"ci_high,omitempty"`
}

// Describe returns the statistics of xs (which it does not change).
//
// The interval is the distribution-free one of the median from order
// statistics (Le Boudec, Performance Evaluation of Computer and
// Communication Systems, thm. 2.1): [x(j), x(n+1-j)] of the sorted
// samples, with the largest j for which a Binomial(n, ½) variable falls
// below j with probability at most 2.5 %. It assumes nothing of the
// distribution (completion times are skewed, with a tail of stalls),
// needs no random resampling (the same results give the same report), and
// its coverage is exact, at least 95 %. Below 6 samples even [min, max]
// covers less than 95 %, so there is none.
func Describe(xs []float64) Stats {
	s := Stats{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	n := len(sorted)
	s.Min, s.Max = sorted[0], sorted[n-1]
	if n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	var sum float64
	for _, x := range sorted {
		sum += x
	}
	s.Mean = sum / float64(n)
	if j := medianCIRank(n, Confidence); j > 0 {
		lo, hi := sorted[j-1], sorted[n-j]
		s.CILow, s.CIHigh = &lo, &hi
	}
	return s
}

// medianCIRank is the largest j ≥ 1 with P(B ≤ j-1) ≤ (1-level)/2 for
// B ~ Binomial(n, ½), or 0 if there is none.
func medianCIRank(n int, level float64) int {
	tail := (1 - level) / 2
	j, cum := 0, 0.0
	for k := 0; k <= n/2; k++ {
		cum += binomialHalf(n, k)
		if cum > tail*(1+1e-12) {
			break
		}
		j = k + 1
	}
	return j
}

// binomialHalf is P(B = k) for B ~ Binomial(n, ½), in logarithms so that
// large n neither overflows nor underflows.
func binomialHalf(n, k int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2)
}
