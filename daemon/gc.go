package daemon

import (
	"log/slog"
	"os"
	"runtime/debug"
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
// usual and the heap stays within twice what is live. An operator's GOGC
// is kept as it is.
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
	log     *slog.Logger
	percent int // as set last; 0 before the first tick
	last    int // registrations at the last tick
	quiet   int // ticks since they last grew
}

func newGCPolicy(log *slog.Logger) *gcPolicy {
	return &gcPolicy{set: debug.SetGCPercent, log: log}
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
		want, p.quiet = growingGCPercent, 0
	case grown > 0:
		p.quiet = 0
	default:
		if p.quiet++; p.quiet >= settleTicks {
			want = settledGCPercent
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
