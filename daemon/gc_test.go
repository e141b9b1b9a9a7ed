package daemon

import (
	"log/slog"
	"testing"
)

// The collector's target is 400 from the start and while registrations
// grow, 100 once they have not grown for 30 ticks, and 400 again when
// they grow by 5% and 1,000 in a tick.
func TestGCPolicy(t *testing.T) {
	var set []int
	p := &gcPolicy{set: func(percent int) int { set = append(set, percent); return 0 }, log: slog.New(slog.DiscardHandler)}
	ticks := func(counts ...int) {
		for _, n := range counts {
			p.tick(n)
		}
	}
	ticks(0, 0, 50_000, 150_000, 300_000, 300_100) // starting, then a million-prefix site registers
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
}
