package traffic

import (
	"math"
	"time"
)

// DataUnit is the size of the application data units whose arrival times
// define jitter: the stream is cut into consecutive 16 KiB units, and a
// unit arrives when the read that completes it returns. A fixed size
// makes the gaps comparable whatever sizes the reads return; the
// receiver's reads are at most DataUnit long, so one read completes at
// most one unit.
const DataUnit = 16 << 10

// gapStats accumulates gaps with Welford's method: count, mean, the sum
// of squared deviations, and the largest gap.
type gapStats struct {
	n    uint64
	mean float64 // seconds
	m2   float64
	max  time.Duration
}

func (g *gapStats) add(gap time.Duration) {
	g.n++
	x := gap.Seconds()
	d := x - g.mean
	g.mean += d / float64(g.n)
	g.m2 += d * (x - g.mean)
	g.max = max(g.max, gap)
}

// stddev is the population standard deviation of the gaps (0 with fewer
// than two).
func (g *gapStats) stddev() time.Duration {
	if g.n < 2 {
		return 0
	}
	return time.Duration(math.Sqrt(g.m2/float64(g.n)) * float64(time.Second))
}

// arrivals turns the receiver's reads into unit arrival gaps, both for
// the current sampling interval and for the whole flow.
type arrivals struct {
	unit     int64
	pending  int64 // bytes of the unit being received
	last     time.Time
	interval gapStats
	total    gapStats
}

func newArrivals(unit int64) *arrivals { return &arrivals{unit: unit} }

// add counts n bytes that a read returned at t. Units completed by the
// same read arrive together, with gaps of zero.
func (a *arrivals) add(t time.Time, n int) {
	a.pending += int64(n)
	for a.pending >= a.unit {
		a.pending -= a.unit
		if !a.last.IsZero() {
			gap := t.Sub(a.last)
			a.interval.add(gap)
			a.total.add(gap)
		}
		a.last = t
	}
}

// takeInterval returns the interval's statistics and starts a new one.
func (a *arrivals) takeInterval() gapStats {
	g := a.interval
	a.interval = gapStats{}
	return g
}
