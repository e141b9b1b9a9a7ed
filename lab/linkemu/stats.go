package linkemu

import (
	"math"
	"time"
)

// LatenessBounds are the upper bounds of the lateness histogram's
// buckets; a last bucket holds what is later than the last bound.
var LatenessBounds = [...]time.Duration{
	1 * time.Microsecond, 2 * time.Microsecond, 5 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 150 * time.Microsecond, 200 * time.Microsecond,
	300 * time.Microsecond, 500 * time.Microsecond, 750 * time.Microsecond,
	1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond,
}

// Histogram counts how late frames were written: the time of the write
// minus the time the link's rate and delay made the frame due.
type Histogram struct {
	// Counts[i] counts the frames not later than LatenessBounds[i] (and
	// later than the bound before); the last counts the rest.
	Counts [len(LatenessBounds) + 1]uint64
	Count  uint64
	Sum    time.Duration
	Max    time.Duration
}

func (h *Histogram) add(late time.Duration) {
	i := 0
	for i < len(LatenessBounds) && late > LatenessBounds[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += late
	h.Max = max(h.Max, late)
}

// Merge adds the counts of o to h.
func (h *Histogram) Merge(o Histogram) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
}

// Quantile returns an upper bound of the q-quantile (0.99 for the p99):
// the bound of the bucket that holds it, or Max when that is smaller or
// the quantile is past the last bound. It is 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	// The smallest value with at least a fraction q of the frames at or
	// below it: the ceil(q*Count)-th, counting from 1.
	rank := uint64(math.Ceil(q*float64(h.Count))) - 1
	if q <= 0 {
		rank = 0
	}
	rank = min(rank, h.Count-1)
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen > rank {
			if i < len(LatenessBounds) {
				return min(LatenessBounds[i], h.Max)
			}
			break
		}
	}
	return h.Max
}

// Mean is the average lateness.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// DirStats are the counters of one direction of a link.
type DirStats struct {
	// FramesIn and BytesIn count what was read from the sending TAP.
	FramesIn, BytesIn uint64
	// Delivered and DeliveredBytes count what was written to the
	// receiving TAP.
	Delivered, DeliveredBytes uint64
	// DroppedLoss counts frames the loss model took, DroppedQueue those
	// that found the queue full, DroppedDown those that arrived while
	// the direction was down or were queued or in flight when it went
	// down, WriteErrors those the receiving TAP refused, TooLong those
	// longer than the MTU allows (which a TAP with that MTU never sends).
	DroppedLoss, DroppedQueue, DroppedDown, WriteErrors, TooLong uint64
	// Lateness is the histogram of how late delivered frames were.
	Lateness Histogram
}

// Stats are the counters of one link.
type Stats struct {
	AB, BA DirStats
}

// Dir returns the counters of direction d.
func (s *Stats) Dir(d Direction) *DirStats {
	if d == BToA {
		return &s.BA
	}
	return &s.AB
}
