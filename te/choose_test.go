package te

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fan is a source 0, n RTRs 1..n and a destination n+1, with one path
// through each RTR of the given RTTs (seconds), split over its two links.
func fan(t *testing.T, rtts ...float64) []Path {
	t.Helper()
	n := len(rtts)
	b := NewBuilder(n + 2)
	for i, r := range rtts {
		b.Add(0, i+1, r/2)
		b.Add(i+1, n+1, r/2)
	}
	b.SetTransit(0, false)
	b.SetTransit(n+1, false)
	return NewSearcher(b.Build()).KShortest(Query{From: 0, To: n + 1, K: 8})
}

func costs(ps []Path) []float64 {
	var out []float64
	for _, p := range ps {
		out = append(out, math.Round(p.Cost*1e6)/1e6)
	}
	return out
}

// TestChoosePaperVector: [LISP-TE]'s sources saw 3 ELPs of close RTTs and
// a 4th much slower one; rule 1 (1.5 times the best, 40 ms above it)
// offers the 3.
func TestChoosePaperVector(t *testing.T) {
	paths := fan(t, 0.080, 0.084, 0.090, 0.300)
	c := Choose(paths, nil, Rules{Max: 4, Factor: 1.5, Spread: 0.040})
	if got := costs(c.Paths); !slices.Equal(got, []float64{0.080, 0.084, 0.090}) {
		t.Fatalf("chose %v, want the 80, 84 and 90 ms paths", got)
	}
	if len(c.Excluded) != 1 || !strings.HasPrefix(c.Excluded[0].Reason, "rule 1: RTT 300.0 ms beyond 120.0 ms") {
		t.Errorf("excluded %+v, want the 300 ms path by rule 1", c.Excluded)
	}
	if math.Abs(c.Spread-0.010) > 1e-9 || math.Abs(c.Total-0.254) > 1e-9 {
		t.Errorf("spread %v total %v, want 10 ms and 254 ms", c.Spread, c.Total)
	}
	// Without rule 1 all four; with at most 2, the two closest.
	if c := Choose(paths, nil, Rules{Max: 4}); len(c.Paths) != 4 {
		t.Errorf("without rule 1: %v", costs(c.Paths))
	}
	if c := Choose(paths, nil, Rules{Max: 2, Factor: 1.5}); !slices.Equal(costs(c.Paths), []float64{0.080, 0.084}) {
		t.Errorf("max 2: %v", costs(c.Paths))
	}
}

// TestChooseLeastDifferential: of 3 paths among 10, 30, 32 and 34 ms the
// set of least differential RTT is not the one of the cheapest paths.
func TestChooseLeastDifferential(t *testing.T) {
	c := Choose(fan(t, 0.010, 0.030, 0.032, 0.034), nil, Rules{Max: 3})
	if got := costs(c.Paths); !slices.Equal(got, []float64{0.030, 0.032, 0.034}) {
		t.Fatalf("chose %v, want 30, 32, 34 ms", got)
	}
}

// TestChooseRule2: with 20 Mbit/s per path, a 1 MiB receive buffer cannot
// keep a 300 ms path busy beside 90 ms ones (the prediction falls from 47
// to 14 Mbit/s), a 64 MiB one can.
func TestChooseRule2(t *testing.T) {
	paths := fan(t, 0.080, 0.084, 0.090, 0.300)
	capacity := func(Path) float64 { return 20e6 }
	c := Choose(paths, nil, Rules{Max: 4, Window: 1 << 20, Gain: 0.05, Capacity: capacity})
	if got := costs(c.Paths); !slices.Equal(got, []float64{0.080, 0.084, 0.090}) {
		t.Fatalf("1 MiB: chose %v", got)
	}
	if len(c.Excluded) != 1 || !strings.HasPrefix(c.Excluded[0].Reason, "rule 2: predicted 14.0 Mbit/s with it, 46.6 Mbit/s without") {
		t.Errorf("1 MiB: excluded %+v", c.Excluded)
	}
	if c := Choose(paths, nil, Rules{Max: 4, Window: 64 << 20, Gain: 0.05, Capacity: capacity}); len(c.Paths) != 4 || c.Predicted != 80e6 {
		t.Errorf("64 MiB: chose %v predicting %v", costs(c.Paths), c.Predicted)
	}
	// A path of unknown capacity leaves rule 2 out.
	unknown := func(p Path) float64 { return map[bool]float64{true: 0, false: 20e6}[p.Cost > 0.2] }
	if c := Choose(paths, nil, Rules{Max: 4, Window: 1 << 20, Gain: 0.05, Capacity: unknown}); len(c.Paths) != 4 {
		t.Errorf("unknown capacity: chose %v", costs(c.Paths))
	}
}

// eld is the link-disjointness example: xs-r1-r3-xd (the shortest),
// xs-r2-r3-xd and xs-r1-r4-xd. The first shares a link with each of the
// others, which share none.
func eld(t *testing.T) (*Graph, []Path) {
	t.Helper()
	const xs, r1, r2, r3, r4, xd = 0, 1, 2, 3, 4, 5
	b := NewBuilder(6)
	for _, e := range [][3]float64{{xs, r1, 10}, {xs, r2, 12}, {r1, r3, 10}, {r2, r3, 10}, {r1, r4, 12}, {r3, xd, 10}, {r4, xd, 11}} {
		b.Add(int(e[0]), int(e[1]), e[2]/1000)
	}
	b.SetTransit(xs, false)
	b.SetTransit(xd, false)
	g := b.Build()
	return g, NewSearcher(g).KShortest(Query{From: xs, To: xd, K: 8})
}

func TestChooseDisjoint(t *testing.T) {
	_, paths := eld(t)
	if len(paths) != 3 || !slices.Equal(paths[0].Nodes, []int32{0, 1, 3, 5}) {
		t.Fatalf("candidates %+v", paths)
	}
	c := Choose(paths, nil, Rules{Max: 4, Disjoint: true})
	var got [][]int32
	for _, p := range c.Paths {
		got = append(got, p.Nodes)
	}
	want := [][]int32{{0, 2, 3, 5}, {0, 1, 4, 5}}
	if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Fatalf("disjoint: chose %v, want %v", got, want)
	}
	if c := Choose(paths, nil, Rules{Max: 4}); len(c.Paths) != 3 {
		t.Errorf("not disjoint: chose %d paths", len(c.Paths))
	}
	// Another source's ELP r2-r3-xd is taken: only paths disjoint from it
	// (and it itself) may join; r1-r3-xd shares r3→xd.
	taken := []Path{{Nodes: []int32{9, 2, 3, 5}, Edges: paths[1].Edges}}
	c = Choose(paths, taken, Rules{Max: 4, Disjoint: true})
	if len(c.Paths) != 2 || !slices.Equal(c.Paths[0].Nodes, []int32{0, 2, 3, 5}) || c.Excluded[0].Other == nil {
		t.Fatalf("with a taken ELP: chose %+v, excluded %+v", c.Paths, c.Excluded)
	}
}

// TestChooseAgainstReference compares Choose with a plain recursive
// enumeration of the disjoint subsets of random candidates: as many paths,
// the same least differential RTT and total.
func TestChooseAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 500 {
		n := 4 + r.IntN(6)
		b, _ := randomGraph(r, n, 2+r.IntN(3))
		b.SetTransit(0, false)
		b.SetTransit(n-1, false)
		g := b.Build()
		paths := NewSearcher(g).KShortest(Query{From: 0, To: n - 1, K: 8})
		rules := Rules{Max: 1 + r.IntN(4), Disjoint: r.IntN(2) == 0}
		c := Choose(paths, nil, rules)
		var best []Path
		var rec func(i int, set []Path)
		rec = func(i int, set []Path) {
			if i == len(paths) {
				if better(set, best) {
					best = slices.Clone(set)
				}
				return
			}
			rec(i+1, set)
			if len(set) < rules.Max && (!rules.Disjoint || !anyConflict(paths[i], set)) {
				rec(i+1, append(set, paths[i]))
			}
		}
		rec(0, nil)
		want := Choice{Paths: best}
		want.score()
		if len(c.Paths) != len(best) || math.Abs(c.Spread-want.Spread) > 1e-9 || math.Abs(c.Total-want.Total) > 1e-9 {
			t.Fatalf("graph %d %+v: chose %v (spread %v total %v), reference %v (spread %v total %v)",
				i, rules, costs(c.Paths), c.Spread, c.Total, costs(best), want.Spread, want.Total)
		}
		for x := range c.Paths {
			for y := range x {
				if rules.Disjoint && Conflict(c.Paths[x], c.Paths[y]) {
					t.Fatalf("graph %d: %v and %v conflict", i, c.Paths[x].Nodes, c.Paths[y].Nodes)
				}
			}
		}
	}
}

func better(a, b []Path) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	ca, cb := Choice{Paths: a}, Choice{Paths: b}
	ca.score()
	cb.score()
	if math.Abs(ca.Spread-cb.Spread) > 1e-12 {
		return ca.Spread < cb.Spread
	}
	return ca.Total < cb.Total-1e-12
}

func anyConflict(p Path, set []Path) bool {
	_, ok := conflicting(p, set)
	return ok
}

func TestLowerFirst(t *testing.T) {
	if !lowerFirst(0b011, 0b110) || lowerFirst(0b110, 0b011) || lowerFirst(5, 5) {
		t.Error("lowerFirst")
	}
}
