package te

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/graph/path"
	"gonum.org/v1/gonum/graph/simple"
)

// yenExample is the graph of Yen's example as Wikipedia tells it: from C
// to H the three shortest loopless paths cost 5 (C-E-F-H), 7 (C-E-G-H)
// and 8 (C-D-F-H).
func yenExample(t *testing.T) (*Graph, map[string]int) {
	t.Helper()
	names := map[string]int{"C": 0, "D": 1, "E": 2, "F": 3, "G": 4, "H": 5}
	b := NewBuilder(len(names))
	for _, e := range []struct {
		u, v string
		w    float64
	}{{"C", "D", 3}, {"C", "E", 2}, {"D", "F", 4}, {"E", "D", 1}, {"E", "F", 2}, {"E", "G", 3}, {"F", "G", 2}, {"F", "H", 1}, {"G", "H", 2}} {
		if err := b.Add(names[e.u], names[e.v], e.w); err != nil {
			t.Fatal(err)
		}
	}
	return b.Build(), names
}

func pathNames(p Path, names map[string]int) string {
	byID := map[int32]string{}
	for n, id := range names {
		byID[int32(id)] = n
	}
	s := ""
	for i, n := range p.Nodes {
		if i > 0 {
			s += "-"
		}
		s += byID[n]
	}
	return s
}

func TestYenExample(t *testing.T) {
	g, names := yenExample(t)
	s := NewSearcher(g)
	got := s.KShortest(Query{From: names["C"], To: names["H"], K: 3})
	want := []struct {
		path string
		cost float64
	}{{"C-E-F-H", 5}, {"C-E-G-H", 7}, {"C-D-F-H", 8}}
	if len(got) != len(want) {
		t.Fatalf("got %d paths, want %d", len(got), len(want))
	}
	for i, w := range want {
		if p := pathNames(got[i], names); p != w.path || got[i].Cost != w.cost {
			t.Errorf("path %d: %s cost %v, want %s cost %v", i, p, got[i].Cost, w.path, w.cost)
		}
	}

	// Bounds: a spread of 2.5 beyond the shortest keeps 5 and 7; a factor
	// of 1.5 keeps 5 and 7 too (7.5); two hops at most keeps none of
	// three edges; the edge E-F avoided leaves 7 and 8 first.
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{K: 8, Spread: 2.5}, []string{"C-E-F-H", "C-E-G-H"}},
		{Query{K: 8, Factor: 1.5}, []string{"C-E-F-H", "C-E-G-H"}},
		{Query{K: 8, MaxHops: 2}, nil},
		{Query{K: 2, Avoid: []int{edge(t, g, names["E"], names["F"])}}, []string{"C-E-G-H", "C-D-F-H"}},
	} {
		tc.q.From, tc.q.To = names["C"], names["H"]
		var got []string
		for _, p := range s.KShortest(tc.q) {
			got = append(got, pathNames(p, names))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.q, got, tc.want)
		}
	}
}

func edge(t *testing.T, g *Graph, u, v int) int {
	t.Helper()
	e, ok := g.Find(u, v)
	if !ok {
		t.Fatalf("no edge %d→%d", u, v)
	}
	return e
}

// randomGraph has n nodes and about n·deg edges of random weights in
// [1, 100).
func randomGraph(r *rand.Rand, n, deg int) (*Builder, [][3]float64) {
	b := NewBuilder(n)
	var edges [][3]float64
	for u := range n {
		for range deg {
			v := r.IntN(n)
			w := 1 + 99*r.Float64()
			if b.Add(u, v, w) == nil && u != v {
				edges = append(edges, [3]float64{float64(u), float64(v), w})
			}
		}
	}
	return b, edges
}

// TestYenAgainstGonum compares KShortest with gonum's YenKShortestPaths on
// 1,000 random graphs: the same paths, in the same order, of the same
// costs.
func TestYenAgainstGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		n := 2 + r.IntN(30)
		deg := 1 + r.IntN(5)
		b, edges := randomGraph(r, n, deg)
		g := b.Build()
		gg := simple.NewWeightedDirectedGraph(0, math.Inf(1))
		for u := range n {
			gg.AddNode(simple.Node(u))
		}
		for _, e := range edges {
			u, v := int64(e[0]), int64(e[1])
			if old := gg.WeightedEdge(u, v); old != nil && old.Weight() <= e[2] {
				continue
			}
			gg.SetWeightedEdge(gg.NewWeightedEdge(simple.Node(u), simple.Node(v), e[2]))
		}
		k := 1 + r.IntN(10)
		spread := math.Inf(1)
		if r.IntN(2) == 0 {
			spread = 50 * r.Float64()
		}
		from, to := r.IntN(n), r.IntN(n)
		if from == to {
			continue
		}
		want := path.YenKShortestPaths(gg, k, spread, simple.Node(from), simple.Node(to))
		got := NewSearcher(g).KShortest(Query{From: from, To: to, K: k, Spread: spread})
		if len(want) == 1 && len(want[0]) == 1 { // gonum's answer for s = t
			want = nil
		}
		if len(got) != len(want) {
			t.Fatalf("graph %d (n %d, %d→%d, k %d, spread %v): %d paths, gonum %d", i, n, from, to, k, spread, len(got), len(want))
		}
		for j := range want {
			wn := make([]int32, len(want[j]))
			cost := 0.0
			for x, nd := range want[j] {
				wn[x] = int32(nd.ID())
				if x > 0 {
					cost += gg.WeightedEdge(want[j][x-1].ID(), nd.ID()).Weight()
				}
			}
			if !slices.Equal(got[j].Nodes, wn) || math.Abs(got[j].Cost-cost) > 1e-9 {
				t.Fatalf("graph %d path %d: %v cost %v, gonum %v cost %v", i, j, got[j].Nodes, got[j].Cost, wn, cost)
			}
			checkPath(t, g, got[j])
		}
	}
}

// checkPath checks that p is a loopless walk of g along its edges, of
// its cost.
func checkPath(t *testing.T, g *Graph, p Path) {
	t.Helper()
	if len(p.Edges) != len(p.Nodes)-1 {
		t.Fatalf("%v: %d edges for %d nodes", p.Nodes, len(p.Edges), len(p.Nodes))
	}
	cost := 0.0
	for i, e := range p.Edges {
		u, v, w := g.Edge(int(e))
		if int32(u) != p.Nodes[i] || int32(v) != p.Nodes[i+1] {
			t.Fatalf("%v: edge %d is %d→%d", p.Nodes, i, u, v)
		}
		cost += w
	}
	if math.Abs(cost-p.Cost) > 1e-9 {
		t.Fatalf("%v: cost %v, edges sum to %v", p.Nodes, p.Cost, cost)
	}
	seen := map[int32]bool{}
	for _, n := range p.Nodes {
		if seen[n] {
			t.Fatalf("%v: loops", p.Nodes)
		}
		seen[n] = true
	}
}

// allPaths lists every loopless path from s to t that keeps to the
// query's constraints, cheapest first: the brute-force reference.
func allPaths(g *Graph, q Query) []Path {
	var out []Path
	avoid := map[int32]bool{}
	for _, e := range q.Avoid {
		avoid[int32(e)] = true
	}
	on := make([]bool, g.Nodes())
	var walk func(nodes, edges []int32, cost float64)
	walk = func(nodes, edges []int32, cost float64) {
		u := nodes[len(nodes)-1]
		if int(u) == q.To {
			out = append(out, Path{Nodes: slices.Clone(nodes), Edges: slices.Clone(edges), Cost: cost})
			return
		}
		if len(nodes) > 1 && !g.Transit(int(u)) {
			return
		}
		if q.MaxHops > 0 && len(edges) >= q.MaxHops {
			return
		}
		for e := g.start[u]; e < g.start[u+1]; e++ {
			v := g.head[e]
			if on[v] || avoid[e] {
				continue
			}
			on[v] = true
			walk(append(nodes, v), append(edges, e), cost+g.weight[e])
			on[v] = false
		}
	}
	on[q.From] = true
	walk([]int32{int32(q.From)}, nil, 0)
	slices.SortFunc(out, comparePaths)
	if len(out) == 0 {
		return nil
	}
	bound := costBound(out[0].Cost, q.Factor, q.Spread)
	n := 0
	for n < len(out) && n < q.K && out[n].Cost <= bound {
		n++
	}
	return out[:n]
}

// TestYenAgainstBruteForce checks the constraints gonum has no part in
// (transit nodes, hop bounds, factor bounds, avoided edges) against an
// enumeration of every loopless path of small random graphs.
func TestYenAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		n := 2 + r.IntN(9)
		b, _ := randomGraph(r, n, 1+r.IntN(4))
		for u := range n {
			if r.IntN(4) == 0 {
				b.SetTransit(u, false)
			}
		}
		g := b.Build()
		q := Query{From: r.IntN(n), To: r.IntN(n), K: 1 + r.IntN(12)}
		if q.From == q.To {
			continue
		}
		if r.IntN(2) == 0 {
			q.MaxHops = 1 + r.IntN(4)
		}
		if r.IntN(2) == 0 {
			q.Factor = 1 + r.Float64()
		}
		if e, ok := g.Find(q.From, q.To); ok && r.IntN(2) == 0 {
			q.Avoid = []int{e}
		}
		want := allPaths(g, q)
		got := NewSearcher(g).KShortest(q)
		if len(got) != len(want) {
			t.Fatalf("graph %d %+v: %d paths, want %d: %v", i, q, len(got), len(want), want)
		}
		for j := range want {
			if math.Abs(got[j].Cost-want[j].Cost) > 1e-9 {
				t.Fatalf("graph %d %+v: path %d %v cost %v, want %v cost %v", i, q, j, got[j].Nodes, got[j].Cost, want[j].Nodes, want[j].Cost)
			}
			checkPath(t, g, got[j])
		}
	}
}

// TestHopBoundKeepsCostlierLabels is the case a plain Dijkstra under a hop
// bound gets wrong: the cheapest way to w (through a) leaves too few hops
// for the cheap way on (through c), so the costlier, shorter way to w must
// still be searched.
func TestHopBoundKeepsCostlierLabels(t *testing.T) {
	const s, a, w, c, dst = 0, 1, 2, 3, 4
	b := NewBuilder(5)
	for _, e := range [][3]float64{{s, a, 1}, {a, w, 1}, {s, w, 5}, {w, c, 1}, {c, dst, 1}, {w, dst, 10}} {
		b.Add(int(e[0]), int(e[1]), e[2])
	}
	got := NewSearcher(b.Build()).KShortest(Query{From: s, To: dst, K: 2, MaxHops: 3})
	if len(got) != 2 || got[0].Cost != 7 || got[1].Cost != 12 {
		t.Fatalf("got %+v, want s-w-c-t (7) then s-a-w-t (12)", got)
	}
}
