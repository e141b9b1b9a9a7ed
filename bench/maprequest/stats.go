package maprequest

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample that at least p percent of the
// samples do not exceed. It interpolates nothing, so a reported p99 is a
// latency some request really had. It returns 0 for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 || p <= 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Distribution summarises latencies, in microseconds.
type Distribution struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_us"`
	P90     float64 `json:"p90_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p999_us"`
	Max     float64 `json:"max_us"`
}

// Summarize sorts samples in place and returns their percentiles.
func Summarize(samples []time.Duration) Distribution {
	slices.Sort(samples)
	us := func(p float64) float64 { return micros(Percentile(samples, p)) }
	return Distribution{
		Samples: len(samples),
		P50:     us(50), P90: us(90), P99: us(99), P999: us(99.9), Max: us(100),
	}
}

// micros is d in microseconds, to a tenth.
func micros(d time.Duration) float64 { return math.Round(float64(d)/100) / 10 }

// median is the median of xs (the mean of the middle two of an even
// number), or 0 for none. It does not change xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
