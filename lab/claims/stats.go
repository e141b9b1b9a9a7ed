package claims

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Level is the confidence level of every interval.
const Level = 0.95

// Interval is an estimate with its 95 % confidence interval; Low and
// High are NaN when the samples are too few for one.
type Interval struct {
	Value, Low, High float64
}

func noInterval(v float64) Interval { return Interval{v, math.NaN(), math.NaN()} }

// HasInterval says whether the interval was computed.
func (iv Interval) HasInterval() bool { return !math.IsNaN(iv.Low) && !math.IsNaN(iv.High) }

// tQuantile is the two-sided critical value of Student's t for Level.
func tQuantile(df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-Level)/2)
}

// meanInterval is the mean with its t-interval (EXPERIMENTS' rule:
// mean ± 95 % t-interval); none below 2 samples.
func meanInterval(xs []float64) Interval {
	m := stat.Mean(xs, nil)
	n := float64(len(xs))
	if len(xs) < 2 {
		return noInterval(m)
	}
	h := tQuantile(n-1) * stat.StdDev(xs, nil) / math.Sqrt(n)
	return Interval{m, m - h, m + h}
}

// welchDF is the Welch-Satterthwaite degrees of freedom of a sum of two
// variances of means, a = s1²/n1 and b = s2²/n2.
func welchDF(a, b float64, n1, n2 int) float64 {
	den := a*a/float64(n1-1) + b*b/float64(n2-1)
	if den == 0 {
		return float64(n1 + n2 - 2)
	}
	return (a + b) * (a + b) / den
}

// differenceInterval is mean(x) - mean(y) with Welch's t-interval.
func differenceInterval(x, y []float64) Interval {
	d := stat.Mean(x, nil) - stat.Mean(y, nil)
	if len(x) < 2 || len(y) < 2 {
		return noInterval(d)
	}
	a, b := stat.Variance(x, nil)/float64(len(x)), stat.Variance(y, nil)/float64(len(y))
	h := tQuantile(welchDF(a, b, len(x), len(y))) * math.Sqrt(a+b)
	return Interval{d, d - h, d + h}
}

// ratioInterval is mean(x) / mean(y) of two independent samples, with the
// interval of the delta method on the ratio's logarithm (its variance
// s1²/(n1·m1²) + s2²/(n2·m2²), Welch's degrees of freedom): it stays
// positive and is asymmetric as a ratio's should be. None when either
// mean is not positive or either sample has fewer than 2 values.
func ratioInterval(x, y []float64) Interval {
	mx, my := stat.Mean(x, nil), stat.Mean(y, nil)
	if my == 0 {
		return noInterval(math.NaN())
	}
	r := mx / my
	if len(x) < 2 || len(y) < 2 || mx <= 0 || my <= 0 {
		return noInterval(r)
	}
	a := stat.Variance(x, nil) / float64(len(x)) / (mx * mx)
	b := stat.Variance(y, nil) / float64(len(y)) / (my * my)
	h := tQuantile(welchDF(a, b, len(x), len(y))) * math.Sqrt(a+b)
	return Interval{r, r * math.Exp(-h), r * math.Exp(h)}
}

// medianInterval is the median with the distribution-free interval of
// order statistics [x(j), x(n+1-j)], j the largest with P(B < j) ≤ 2.5 %
// for B ~ Binomial(n, ½) (Le Boudec, thm. 2.1); none below 6 samples.
func medianInterval(xs []float64) Interval {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return noInterval(math.NaN())
	}
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	b := distuv.Binomial{N: float64(n), P: 0.5}
	j := 0
	for k := 1; k <= n/2; k++ {
		if b.CDF(float64(k-1)) > (1-Level)/2*(1+1e-12) {
			break
		}
		j = k
	}
	if j == 0 {
		return noInterval(med)
	}
	return Interval{med, s[j-1], s[n-j]}
}

// shareInterval is the share k/n with Wilson's score interval.
func shareInterval(k, n int) Interval {
	if n == 0 {
		return noInterval(math.NaN())
	}
	p, nn := float64(k)/float64(n), float64(n)
	z := distuv.UnitNormal.Quantile(1 - (1-Level)/2)
	den := 1 + z*z/nn
	mid := (p + z*z/(2*nn)) / den
	h := z * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn)) / den
	return Interval{p, max(0, mid-h), min(1, mid+h)}
}

// ranks are the ranks of xs from 1, ties given their mean rank.
func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(xs[a], xs[b]) })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// spearman is Spearman's rank correlation of the pairs (x[i], y[i]),
// with the interval of Fisher's z and the standard error
// sqrt(1.06/(n-3)) of Fieller, Hartley and Pearson; none below 4 pairs.
func spearman(x, y []float64) Interval {
	if len(x) < 2 {
		return noInterval(math.NaN())
	}
	rho := stat.Correlation(ranks(x), ranks(y), nil)
	if len(x) < 4 || math.IsNaN(rho) || math.Abs(rho) >= 1 {
		return noInterval(rho)
	}
	z := math.Atanh(rho)
	h := distuv.UnitNormal.Quantile(1-(1-Level)/2) * math.Sqrt(1.06/float64(len(x)-3))
	return Interval{rho, math.Tanh(z - h), math.Tanh(z + h)}
}

// mannWhitney is the two-sided p-value of the Mann-Whitney U test of x
// against y: exact (the distribution of U counted over every split of
// the ranks) when there are no ties and at most 40 samples, else the
// normal approximation with the tie correction and a continuity
// correction.
func mannWhitney(x, y []float64) float64 {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return math.NaN()
	}
	all := append(slices.Clone(x), y...)
	r := ranks(all)
	r1 := 0.0
	for i := range n1 {
		r1 += r[i]
	}
	u := r1 - float64(n1*(n1+1))/2
	mu := float64(n1*n2) / 2
	ties := 0.0
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[i] {
			j++
		}
		t := float64(j - i + 1)
		ties += t*t*t - t
		i = j + 1
	}
	if ties == 0 && n1+n2 <= 40 {
		return exactMannWhitney(n1, n2, u)
	}
	n := float64(n1 + n2)
	sigma := math.Sqrt(float64(n1*n2) / 12 * (n + 1 - ties/(n*(n-1))))
	if sigma == 0 {
		return 1
	}
	z := (math.Abs(u-mu) - 0.5) / sigma
	return min(1, 2*(1-distuv.UnitNormal.CDF(max(z, 0))))
}

// exactMannWhitney is P(|U - n1·n2/2| ≥ |u - n1·n2/2|) under the null
// hypothesis, from the number of ways each U arises (the recurrence
// c(n1, n2, u) = c(n1-1, n2, u-n2) + c(n1, n2-1, u)).
func exactMannWhitney(n1, n2 int, u float64) float64 {
	maxU := n1 * n2
	// prev[j][k]: the orderings of j values of x and m-1 of y with U =
	// k; with no y, U is 0.
	prev := make([][]float64, n1+1)
	for j := range prev {
		prev[j] = make([]float64, maxU+1)
		prev[j][0] = 1
	}
	for m := 1; m <= n2; m++ {
		cur := make([][]float64, n1+1)
		for j := range cur {
			cur[j] = make([]float64, maxU+1)
		}
		cur[0][0] = 1
		// The largest value is a y (U unchanged) or an x (it beats all
		// m values of y).
		for j := 1; j <= n1; j++ {
			for k := 0; k <= j*m; k++ {
				v := prev[j][k]
				if k >= m {
					v += cur[j-1][k-m]
				}
				cur[j][k] = v
			}
		}
		prev = cur
	}
	counts := prev[n1]
	total := 0.0
	for _, c := range counts {
		total += c
	}
	mu := float64(maxU) / 2
	d := math.Abs(u-mu) - 1e-9
	tail := 0.0
	for k, c := range counts {
		if math.Abs(float64(k)-mu) >= d {
			tail += c
		}
	}
	return min(1, tail/total)
}

// bootstrapSpread is the largest group mean over the smallest, with a
// percentile bootstrap interval (2,000 resamples within each group, a
// fixed seed so that the same results give the same report); none when
// a group has fewer than 2 samples.
func bootstrapSpread(groups [][]float64) Interval {
	spread := func(means []float64) float64 {
		lo, hi := slices.Min(means), slices.Max(means)
		if lo <= 0 {
			return math.NaN()
		}
		return hi / lo
	}
	means := make([]float64, len(groups))
	small := false
	for i, g := range groups {
		means[i] = stat.Mean(g, nil)
		small = small || len(g) < 2
	}
	v := spread(means)
	if small || math.IsNaN(v) {
		return noInterval(v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const resamples = 2000
	boot := make([]float64, 0, resamples)
	for range resamples {
		for i, g := range groups {
			sum := 0.0
			for range g {
				sum += g[rng.IntN(len(g))]
			}
			means[i] = sum / float64(len(g))
		}
		if s := spread(means); !math.IsNaN(s) {
			boot = append(boot, s)
		}
	}
	if len(boot) < resamples/2 {
		return noInterval(v)
	}
	slices.Sort(boot)
	return Interval{v, stat.Quantile((1-Level)/2, stat.Empirical, boot, nil), stat.Quantile(1-(1-Level)/2, stat.Empirical, boot, nil)}
}
