package maprequest

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i)*time.Microsecond)
	}
	for _, tc := range []struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{hundred, 50, 50 * time.Microsecond},
		{hundred, 90, 90 * time.Microsecond},
		{hundred, 99, 99 * time.Microsecond},
		{hundred, 99.9, 100 * time.Microsecond}, // rank ceil(99.9) = 100
		{hundred, 100, 100 * time.Microsecond},
		{hundred, 0.5, 1 * time.Microsecond},
		{hundred, 0, 0},
		{nil, 50, 0},
		{[]time.Duration{7}, 99, 7},
		{[]time.Duration{1, 2, 3, 4}, 50, 2}, // no interpolation: a latency that happened
		{[]time.Duration{1, 2, 3, 4}, 51, 3},
	} {
		if got := Percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("Percentile(%d samples, %v) = %v, want %v", len(tc.samples), tc.p, got, tc.want)
		}
	}
}

func TestSummarizeSortsAndOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	samples := make([]time.Duration, 10_000)
	for i := range samples {
		samples[i] = time.Duration(r.ExpFloat64() * float64(30*time.Microsecond))
	}
	max := slices.Max(samples)
	d := Summarize(samples)
	if !slices.IsSorted(samples) {
		t.Error("samples are not sorted")
	}
	if d.Samples != len(samples) || d.Max != micros(max) {
		t.Errorf("samples %d, max %v µs; want %d, %v µs", d.Samples, d.Max, len(samples), micros(max))
	}
	if !(0 < d.P50 && d.P50 <= d.P90 && d.P90 <= d.P99 && d.P99 <= d.P999 && d.P999 <= d.Max) {
		t.Errorf("percentiles out of order: %+v", d)
	}
	// The median of an exponential distribution is its mean times ln 2.
	if d.P50 < 18 || d.P50 > 24 {
		t.Errorf("p50 %v µs, want about 20.8", d.P50)
	}
	if z := Summarize(nil); z != (Distribution{}) {
		t.Errorf("no samples: %+v", z)
	}
}

func TestMicros(t *testing.T) {
	if got := micros(1234567 * time.Nanosecond); got != 1234.6 {
		t.Errorf("micros = %v, want 1234.6", got)
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{0.9, 0.1, 0.8}
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {xs, 0.8}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if xs[0] != 0.9 || xs[1] != 0.1 {
		t.Errorf("median reordered its argument: %v", xs)
	}
}

// The two p99 ratios of compareTails: alike where nothing disturbs
// either server, apart where lispd is delayed in a few of its turns (as
// by a garbage collection), which only the pooled samples show.
func TestCompareTails(t *testing.T) {
	steady := func(n int, base time.Duration) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = base + time.Duration(i%100)*time.Microsecond
		}
		return s
	}
	var lispd, ref [][]time.Duration
	for range 10 {
		lispd, ref = append(lispd, steady(1000, 50*time.Microsecond)), append(ref, steady(1000, 50*time.Microsecond))
	}
	if got := compareTails(lispd, ref); got.pooled != 1 || got.medianTurn != 1 || len(got.turnRatios) != 10 {
		t.Errorf("alike: %+v", got)
	}
	// In 3 of lispd's 10 turns, 5% of its requests wait 10 ms: 1.5% of
	// all its samples.
	for _, turn := range []int{1, 4, 7} {
		for i := range 50 {
			lispd[turn][i*20] = 10 * time.Millisecond
		}
	}
	got := compareTails(lispd, ref)
	if got.medianTurn != 1 || got.pooled < 50 || got.lispdTurnP99[4] != 10000 || got.refTurnP99[4] != 148 {
		t.Errorf("delayed in 3 turns: pooled %v, median of the turns %v, turns' p99 %v and %v",
			got.pooled, got.medianTurn, got.lispdTurnP99, got.refTurnP99)
	}
}
