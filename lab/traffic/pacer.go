package traffic

import (
	"math"
	"time"
)

// pacer says how many datagrams a constant-rate sender owes at a given
// time. Datagram i (from 0) is due at start + i*size/rate; the sender
// wakes about once a millisecond and sends every datagram due by then, so
// a late wake-up makes a larger batch, never a lower rate, and the count
// after a duration is exact rather than the sum of rounded sleeps.
type pacer struct {
	start time.Time
	// perSecond is the datagram rate: rate in bits/s over 8*size.
	perSecond float64
	// total is how many datagrams the flow sends: those due before its end.
	total uint64
	sent  uint64
}

func newPacer(start time.Time, rate float64, size int, d time.Duration) *pacer {
	ps := rate / 8 / float64(size)
	return &pacer{
		start:     start,
		perSecond: ps,
		total:     uint64(math.Ceil(ps * d.Seconds())),
	}
}

// due is how many datagrams to send now: those scheduled at or before now
// and not yet sent, within the flow's total.
func (p *pacer) due(now time.Time) uint64 {
	el := now.Sub(p.start).Seconds()
	if el < 0 {
		return 0
	}
	scheduled := min(uint64(math.Floor(el*p.perSecond))+1, p.total)
	if scheduled <= p.sent {
		return 0
	}
	return scheduled - p.sent
}

// done reports whether every datagram has been sent.
func (p *pacer) done() bool { return p.sent >= p.total }
