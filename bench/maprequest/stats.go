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

// tails compares lispd's latencies at half load with the reference's.
type tails struct {
	// pooled is the ratio of the p99s of all each server's samples, its
	// turns taken together: the p99 at half load of each over the whole
	// measurement, the turns interleaved so that the machine's other work
	// falls on both alike. A delay of lispd's own (a collection, a lock
	// held) counts whatever turns it falls in. On a busy machine it also
	// counts the longest burst of other work either server met: one that
	// delays 1% of a server's samples sets its p99.
	pooled float64
	// medianTurn is the median over the turns of lispd's p99 over the
	// reference's in the turn next to it: a burst of other work that
	// falls on a few turns moves it little, but neither does a delay of
	// lispd's own that falls on fewer than half of them.
	medianTurn                           float64
	turnRatios, lispdTurnP99, refTurnP99 []float64
}

// compareTails compares the latencies of lispd's turns with those of the
// reference's (turn i of each next to the other), in microseconds. It
// sorts each turn's samples in place; it copies them to pool them.
func compareTails(lispdTurns, refTurns [][]time.Duration) tails {
	var t tails
	var all [2][]time.Duration
	for i := range min(len(lispdTurns), len(refTurns)) {
		l, r := Summarize(lispdTurns[i]).P99, Summarize(refTurns[i]).P99
		t.lispdTurnP99, t.refTurnP99 = append(t.lispdTurnP99, l), append(t.refTurnP99, r)
		if len(lispdTurns[i]) > 0 && r > 0 { // else the turn says nothing
			t.turnRatios = append(t.turnRatios, l/r)
		}
		all[0], all[1] = append(all[0], lispdTurns[i]...), append(all[1], refTurns[i]...)
	}
	t.medianTurn = median(t.turnRatios)
	if l, r := Summarize(all[0]).P99, Summarize(all[1]).P99; l > 0 && r > 0 {
		t.pooled = l / r
	}
	return t
}
