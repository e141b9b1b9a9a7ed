package daemon

import (
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// The garbage collector's target while the map-server's registrations
// grow, and once they have not grown for settleTicks seconds. A
// collection marks the whole live heap, and the collector starts one
// whenever the heap has grown by the target's percentage since the last:
// at the default 100, filling an empty map-server with a million
// registrations (about 760 bytes each) takes a collection at every
// doubling of the heap, each marking all that was registered before, and
// keeps the collector running, its write barriers on, for a large part
// of the time. What the registrations allocate is live, so a collection
// then finds almost nothing to free: at 400 the collector runs about half
// as often and the heap holds hardly more, the registrations. Once they
// stop growing, the target returns to 100, so that what the daemon's
// other work leaves (status, metrics, changed locators) is collected as
// usual and the heap stays within twice what is live. Returning to 100
// must not start a collection by itself: with the heap grown far beyond
// twice what the last collection found live, it would, and mark a
// million registrations while the map-server answers, for nothing (all
// of it is live). Then the target returns to 100 at the first collection
// that comes of itself. An operator's GOGC is kept as it is.
const (
	growingGCPercent = 400
	settledGCPercent = 100
	settleTicks      = 30
	// The registrations grow when they are at least 5% and 1,000 more
	// than a tick before.
	growthPercent = 5
	growthMin     = 1000
)

// WithCollectorTarget lets lispd set the garbage collector's target by
// the growth of its registrations (gcPolicy), unless GOGC is set. It is
// the process's setting: only the lispd command asks for it.
func WithCollectorTarget() Option {
	return func(o *options) { o.gcTarget = os.Getenv("GOGC") == "" }
}

// gcPolicy sets the collector's target from the number of registrations,
// read every tick.
type gcPolicy struct {
	set     func(percent int) int // debug.SetGCPercent, or a test's
	heap    func() heapState      // readHeap, or a test's
	log     *slog.Logger
	percent int    // as set last; 0 before the first tick
	last    int    // registrations at the last tick
	quiet   int    // ticks since they last grew
	waiting uint64 // settled, the collections counted when it began to wait for one; 0: not waiting
}

// heapState is what the runtime says of the heap.
type heapState struct {
	live        uint64 // found live by the last collection
	now         uint64 // in objects now, live or not yet swept
	collections uint64 // since the start
}

func newGCPolicy(log *slog.Logger) *gcPolicy {
	return &gcPolicy{set: debug.SetGCPercent, heap: readHeap, log: log}
}

var heapMetrics = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/cycles/total:gc-cycles"},
}

func readHeap() heapState {
	s := make([]metrics.Sample, len(heapMetrics))
	copy(s, heapMetrics)
	metrics.Read(s)
	return heapState{live: s[0].Value.Uint64(), now: s[1].Value.Uint64(), collections: s[2].Value.Uint64()}
}

// tick takes the number of registrations now.
func (p *gcPolicy) tick(registrations int) {
	grown := registrations - p.last
	p.last = registrations
	want := p.percent
	switch {
	case p.percent == 0: // the first tick: registrations come, or will
		want, p.quiet = growingGCPercent, 0
	case grown >= growthMin && grown*100 >= (registrations-grown)*growthPercent:
		want, p.quiet, p.waiting = growingGCPercent, 0, 0
	case grown > 0:
		p.quiet = 0
	default:
		p.quiet++
	}
	if want == growingGCPercent && p.quiet >= settleTicks {
		// Settled: at 100 at once if that starts no collection, else
		// once one came.
		h := p.heap()
		switch {
		case h.now <= 2*h.live || (p.waiting != 0 && h.collections >= p.waiting):
			want, p.waiting = settledGCPercent, 0
		case p.waiting == 0:
			p.waiting = h.collections + 1
		}
	}
	if want != p.percent {
		p.set(want)
		if p.percent != 0 {
			p.log.Debug("garbage collector target", "gogc", want, "registrations", registrations)
		}
		p.percent = want
	}
}
