package daemon

import (
	"log/slog"
	"testing"
)

// The collector's target is 400 from the start and while registrations
// grow, 100 once they have not grown for 30 ticks (when that starts no
// collection, else after the next), and 400 again when they grow by 5%
// and 1,000 in a tick.
func TestGCPolicy(t *testing.T) {
	var set []int
	heap := heapState{live: 700 << 20, now: 760 << 20, collections: 12}
	p := &gcPolicy{set: func(percent int) int { set = append(set, percent); return 0 },
		heap: func() heapState { return heap }, log: slog.New(slog.DiscardHandler)}
	ticks := func(counts ...int) {
		for _, n := range counts {
			p.tick(n)
		}
	}
	ticks(0, 0, 50_000, 150_000, 300_000, 300_100) // starting, then a site registers
	if len(set) != 1 || set[0] != 400 || p.percent != 400 {
		t.Fatalf("while registering: set %v, now %d", set, p.percent)
	}
	for range settleTicks - 1 {
		p.tick(300_100)
	}
	if p.percent != 400 {
		t.Fatalf("after %d quiet ticks: %d", settleTicks-1, p.percent)
	}
	ticks(300_100, 300_200, 310_000) // settled; then refreshes, expiries and 3% more do not count
	if len(set) != 2 || set[1] != 100 || p.percent != 100 {
		t.Fatalf("settled: set %v", set)
	}
	ticks(300_000, 330_000) // 10% more
	if len(set) != 3 || set[2] != 400 {
		t.Fatalf("growing again: set %v", set)
	}
	// Settled with the heap beyond twice what the last collection found
	// live: 100 would start a collection, so it waits for one.
	heap = heapState{live: 200 << 20, now: 900 << 20, collections: 15}
	for range settleTicks + 5 {
		p.tick(330_000)
	}
	if p.percent != 400 {
		t.Fatalf("settled before a collection: %d", p.percent)
	}
	heap = heapState{live: 400 << 20, now: 900 << 20, collections: 16} // one came, whatever it found
	p.tick(330_000)
	if len(set) != 4 || set[3] != 100 {
		t.Fatalf("settled after a collection: set %v", set)
	}
}
