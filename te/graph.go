// Package te is the traffic engineering of a LISP-TE overlay ([LISP-TE]):
// the overlay as a graph of its tunnel routers weighted by the RTTs their
// RLOC probing measures, the k shortest loopless paths between two of them
// (Yen's algorithm), the choice among those of a set of Explicit Locator
// Paths (link-disjoint where asked, with the least differential RTT, and
// none that would hold the others back), hysteresis so that noise does not
// move paths, and stable slots that give an ELP the same path ID at every
// router while any map-cache may hold it.
//
// It is pure: no clock, no network. The te role of lispd (package
// control/pce) feeds it measurements and time.
package te

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Graph is a directed graph with non-negative edge weights, in compressed
// sparse row form: the edges leaving a node are contiguous, sorted by
// head, and an edge is named by its index. The same edges are also kept
// by head, for searches towards a target. A Graph is read-only once
// built, and safe for concurrent readers.
type Graph struct {
	n       int
	start   []int32 // node -> its first out-edge; len n+1
	head    []int32 // edge -> its head
	tail    []int32 // edge -> its tail
	weight  []float64
	rstart  []int32 // node -> its first in-edge (by position in redge); len n+1
	redge   []int32 // in-edges grouped by head: edge indices
	transit []bool  // node may be an inner node of a path
}

// Builder collects the edges of a Graph.
type Builder struct {
	n       int
	edges   []builderEdge
	transit []bool
}

type builderEdge struct {
	u, v int32
	w    float64
}

// NewBuilder starts a graph of n nodes, numbered 0 to n-1, every one of
// them a transit node until SetTransit says otherwise.
func NewBuilder(n int) *Builder {
	t := make([]bool, n)
	for i := range t {
		t[i] = true
	}
	return &Builder{n: n, transit: t}
}

// Add adds the edge u→v of weight w. Of several edges u→v the lightest
// is kept. Loops (u = v) are ignored.
func (b *Builder) Add(u, v int, w float64) error {
	switch {
	case u < 0 || u >= b.n || v < 0 || v >= b.n:
		return fmt.Errorf("edge %d→%d: nodes are 0 to %d", u, v, b.n-1)
	case w < 0 || math.IsNaN(w) || math.IsInf(w, 0):
		return fmt.Errorf("edge %d→%d: weight %v is not a finite non-negative number", u, v, w)
	case u == v:
		return nil
	}
	b.edges = append(b.edges, builderEdge{int32(u), int32(v), w})
	return nil
}

// SetTransit says whether node u may be an inner node of a path: RTRs
// may, the xTRs at the ends of paths may not.
func (b *Builder) SetTransit(u int, transit bool) { b.transit[u] = transit }

// Build returns the graph.
func (b *Builder) Build() *Graph {
	es := slices.Clone(b.edges)
	slices.SortFunc(es, func(x, y builderEdge) int {
		return cmp.Or(cmp.Compare(x.u, y.u), cmp.Compare(x.v, y.v), cmp.Compare(x.w, y.w))
	})
	es = slices.CompactFunc(es, func(x, y builderEdge) bool { return x.u == y.u && x.v == y.v })
	g := &Graph{
		n:       b.n,
		start:   make([]int32, b.n+1),
		head:    make([]int32, len(es)),
		tail:    make([]int32, len(es)),
		weight:  make([]float64, len(es)),
		rstart:  make([]int32, b.n+1),
		redge:   make([]int32, len(es)),
		transit: slices.Clone(b.transit),
	}
	for i, e := range es {
		g.head[i], g.tail[i], g.weight[i] = e.v, e.u, e.w
		g.start[e.u+1]++
		g.rstart[e.v+1]++
	}
	for u := range b.n {
		g.start[u+1] += g.start[u]
		g.rstart[u+1] += g.rstart[u]
	}
	fill := slices.Clone(g.rstart[:b.n])
	for i, e := range es {
		g.redge[fill[e.v]] = int32(i)
		fill[e.v]++
	}
	return g
}

// Nodes is the number of nodes; Edges the number of edges.
func (g *Graph) Nodes() int { return g.n }
func (g *Graph) Edges() int { return len(g.head) }

// Edge returns the tail, head and weight of edge e.
func (g *Graph) Edge(e int) (u, v int, w float64) {
	return int(g.tail[e]), int(g.head[e]), g.weight[e]
}

// Find returns the edge u→v, if there is one.
func (g *Graph) Find(u, v int) (int, bool) {
	if u < 0 || u >= g.n {
		return 0, false
	}
	lo, hi := int(g.start[u]), int(g.start[u+1])
	i, ok := slices.BinarySearch(g.head[lo:hi], int32(v))
	return lo + i, ok
}

// Transit reports whether u may be an inner node of a path.
func (g *Graph) Transit(u int) bool { return g.transit[u] }

// Bytes is the memory the graph holds, for reports.
func (g *Graph) Bytes() int {
	return 4*(len(g.start)+len(g.head)+len(g.tail)+len(g.rstart)+len(g.redge)) + 8*len(g.weight) + len(g.transit)
}
