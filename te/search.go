package te

import (
	"math"
	"slices"
)

// Searcher finds shortest paths in one Graph towards one target at a
// time. It knows, for the target, the exact distance and the fewest hops
// from every node (one reverse search), and uses them as the heuristic
// and the hop bound of its forward searches: an A* whose heuristic is
// exact on the whole graph, and admissible on what is left of it once
// Yen's algorithm removes nodes and edges, explores little more than the
// path it returns.
//
// A Searcher keeps its scratch space between searches: it is not safe
// for concurrent use. Make one per goroutine; they may share the Graph.
type Searcher struct {
	g *Graph

	// The reverse searches from the target: the fewest hops of each node
	// to it, and a Dijkstra settled as far as radius (settled == rgen).
	target  int32     // -1 before the first search
	dist    []float64 // node -> its distance to target (tentative until settled)
	hops    []int32   // node -> the fewest edges to target, noHops if none
	rgen    uint32
	settled []uint32
	radius  float64
	rheap   []int32 // nodes, by dist
	pos     []int32 // node -> its index in rheap + 1, 0 if out
	queue   []int32

	// Nodes and edges removed for one spur search (mark == gen) or for
	// a whole query (mark == qgen).
	gen, qgen          uint32
	nodeMark, edgeMark []uint32
	permMark           []uint32

	// The label-setting search: the fewest hops with which each node was
	// settled (valid when seen == sgen), the labels and their heap.
	sgen     uint32
	seen     []uint32
	bestHops []int32
	labels   []label
	heap     []int32 // label indices, a binary heap on labels' f
}

const noHops = math.MaxInt32

// label is a path from the search's start to node: its cost, its number
// of edges and the label it extends (-1 for the start).
type label struct {
	node   int32
	edge   int32 // the last edge, -1 for the start
	hops   int32
	parent int32
	g, f   float64 // cost so far; plus the distance to the target
}

// NewSearcher returns a Searcher of g.
func NewSearcher(g *Graph) *Searcher {
	return &Searcher{
		g:        g,
		target:   -1,
		dist:     make([]float64, g.n),
		hops:     make([]int32, g.n),
		settled:  make([]uint32, g.n),
		pos:      make([]int32, g.n),
		nodeMark: make([]uint32, g.n),
		edgeMark: make([]uint32, len(g.head)),
		permMark: make([]uint32, len(g.head)),
		seen:     make([]uint32, g.n),
		bestHops: make([]int32, g.n),
	}
}

// Graph is the graph the Searcher searches.
func (s *Searcher) Graph() *Graph { return s.g }

// Bytes is the scratch memory the Searcher holds, for reports.
func (s *Searcher) Bytes() int {
	return 8*len(s.dist) + 4*(len(s.hops)+len(s.settled)+len(s.pos)+cap(s.rheap)+cap(s.queue)+len(s.nodeMark)+len(s.edgeMark)+len(s.permMark)+len(s.seen)+len(s.bestHops)+cap(s.heap)) +
		40*cap(s.labels)
}

// prepare readies the search towards t: the fewest hops of every node to
// t (a breadth-first search over the edges reversed), and a reverse
// Dijkstra that grow settles as far as a query needs. A path may only
// pass through transit nodes, so neither search goes on from a node that
// is not one.
func (s *Searcher) prepare(t int32) {
	if s.target == t {
		return
	}
	s.target = t
	g := s.g
	s.rgen = nextGen(s.rgen, s.settled)
	for i := range s.dist {
		s.dist[i] = math.Inf(1)
		s.hops[i] = noHops
	}
	for _, v := range s.rheap {
		s.pos[v] = 0
	}
	s.rheap = s.rheap[:0]
	s.hops[t] = 0
	s.radius = 0
	s.update(t, 0)
	queue := append(s.queue[:0], t)
	for head := 0; head < len(queue); head++ {
		v := queue[head]
		if v != t && !g.transit[v] {
			continue
		}
		for _, e := range g.redge[g.rstart[v]:g.rstart[v+1]] {
			if u := g.tail[e]; s.hops[u] == noHops {
				s.hops[u] = s.hops[v] + 1
				queue = append(queue, u)
			}
		}
	}
	s.queue = queue[:0]
}

// grow settles nodes of the reverse Dijkstra, nearest to the target
// first, until `from` is settled and every node nearer than radius is.
// Nodes not settled are at least radius away: h uses that as their
// distance, which keeps the heuristic consistent.
func (s *Searcher) grow(from int32, radius float64) {
	g := s.g
	for len(s.rheap) > 0 && (s.settled[from] != s.rgen || s.radius <= radius) {
		v := s.popNearest()
		s.settled[v] = s.rgen
		s.radius = s.dist[v]
		if v != s.target && !g.transit[v] {
			continue
		}
		for _, e := range g.redge[g.rstart[v]:g.rstart[v+1]] {
			u := g.tail[e]
			if d := s.radius + g.weight[e]; d < s.dist[u] {
				s.update(u, d)
			}
		}
	}
	if len(s.rheap) == 0 {
		s.radius = math.Inf(1) // every node that reaches the target is settled
	}
}

// h is the heuristic: a lower bound of v's distance to the target.
func (s *Searcher) h(v int32) float64 {
	if s.settled[v] == s.rgen {
		return s.dist[v]
	}
	return s.radius
}

// The reverse Dijkstra's heap holds each node once (pos is its index +
// 1, 0 when out), and a shorter distance moves it up: the heap stays as
// small as the frontier.

func (s *Searcher) update(v int32, d float64) {
	s.dist[v] = d
	i := int(s.pos[v]) - 1
	if i < 0 {
		s.rheap = append(s.rheap, v)
		i = len(s.rheap) - 1
	}
	s.up(i)
}

func (s *Searcher) up(i int) {
	h := s.rheap
	v := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if s.dist[h[p]] <= s.dist[v] {
			break
		}
		h[i] = h[p]
		s.pos[h[i]] = int32(i + 1)
		i = p
	}
	h[i] = v
	s.pos[v] = int32(i + 1)
}

func (s *Searcher) popNearest() int32 {
	h := s.rheap
	top := h[0]
	s.pos[top] = 0
	last := h[len(h)-1]
	h = h[:len(h)-1]
	s.rheap = h
	if len(h) == 0 {
		return top
	}
	i, d := 0, s.dist[last]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && s.dist[h[c+1]] < s.dist[h[c]] {
			c++
		}
		if d <= s.dist[h[c]] {
			break
		}
		h[i] = h[c]
		s.pos[h[i]] = int32(i + 1)
		i = c
	}
	h[i] = last
	s.pos[last] = int32(i + 1)
	return top
}

// limits bound a spur search: the whole path's cost and edges, given
// those of the root before the spur node.
type limits struct {
	rootCost float64
	rootHops int32
	maxCost  float64 // +Inf for none
	maxHops  int32   // noHops for none
}

// shortest finds the cheapest path from `from` to the target that avoids
// the removed nodes and edges and keeps within lim, as the index of its
// last label, or -1. It is a label-setting search over (node, hops): a
// label is dropped when its node was settled with as few hops or fewer
// (that one was cheaper: the heuristic is consistent), so that under a
// hop bound a costlier path with fewer hops still gets its turn, and every
// path it returns is loopless.
func (s *Searcher) shortest(from int32, lim limits) int32 {
	g, t := s.g, s.target
	s.sgen = nextGen(s.sgen, s.seen)
	s.labels = s.labels[:0]
	s.heap = s.heap[:0]
	if s.hops[from] == noHops || lim.rootHops+s.hops[from] > lim.maxHops {
		return -1
	}
	s.push(label{node: from, edge: -1, parent: -1, f: s.h(from)})
	for len(s.heap) > 0 {
		li := s.pop()
		l := s.labels[li]
		v := l.node
		if s.seen[v] == s.sgen && s.bestHops[v] <= l.hops {
			continue
		}
		s.seen[v], s.bestHops[v] = s.sgen, l.hops
		if v == t {
			return li
		}
		if v != from && !g.transit[v] {
			continue
		}
		for e := g.start[v]; e < g.start[v+1]; e++ {
			w := g.head[e]
			if s.edgeMark[e] == s.gen || s.permMark[e] == s.qgen || s.nodeMark[w] == s.gen || (w != t && !g.transit[w]) {
				continue
			}
			hops := l.hops + 1
			if s.seen[w] == s.sgen && s.bestHops[w] <= hops {
				continue
			}
			if lim.rootHops+hops+s.hops[w] > lim.maxHops || s.hops[w] == noHops {
				continue
			}
			cost := l.g + g.weight[e]
			f := cost + s.h(w)
			if lim.rootCost+f > lim.maxCost {
				continue
			}
			s.push(label{node: w, edge: e, hops: hops, parent: li, g: cost, f: f})
		}
	}
	return -1
}

// walk returns the nodes and edges of the path ending at label li.
func (s *Searcher) walk(li int32) (nodes, edges []int32) {
	for ; li >= 0; li = s.labels[li].parent {
		l := s.labels[li]
		nodes = append(nodes, l.node)
		if l.edge >= 0 {
			edges = append(edges, l.edge)
		}
	}
	slices.Reverse(nodes)
	slices.Reverse(edges)
	return nodes, edges
}

// nextGen moves a generation counter on; when it wraps, the marks it
// stamps are cleared so that no old stamp matches.
func nextGen(gen uint32, marks ...[]uint32) uint32 {
	gen++
	if gen == 0 {
		for _, m := range marks {
			clear(m)
		}
		gen = 1
	}
	return gen
}

// push adds a label and queues it by f.
func (s *Searcher) push(l label) {
	s.labels = append(s.labels, l)
	s.heap = append(s.heap, int32(len(s.labels)-1))
	h := s.heap
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop takes the label of least f (of fewer hops on ties) off the heap.
func (s *Searcher) pop() int32 {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && s.less(h[c+1], h[c]) {
			c++
		}
		if !s.less(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	s.heap = h
	return top
}

func (s *Searcher) less(a, b int32) bool {
	la, lb := &s.labels[a], &s.labels[b]
	if la.f != lb.f {
		return la.f < lb.f
	}
	return la.hops < lb.hops
}
