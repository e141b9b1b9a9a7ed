package te

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// Query asks for the K shortest loopless paths from From to To.
type Query struct {
	From, To int
	K        int
	// Factor and Spread bound the paths' costs by the shortest one's, d:
	// at most Factor·d when Factor is 1 or more, at most d + Spread when
	// Spread is positive. Without either, only K bounds the paths.
	Factor, Spread float64
	// MaxHops bounds a path's edges; 0 for no bound.
	MaxHops int
	// Avoid are edges no path may take: the direct edge between the ends
	// when only paths through RTRs are wanted.
	Avoid []int
}

// Path is a path of a Graph: its nodes, the edges between them and the
// sum of their weights.
type Path struct {
	Nodes []int32
	Edges []int32
	Cost  float64
}

// Hops is the number of edges.
func (p Path) Hops() int { return len(p.Edges) }

// KShortest returns the K shortest loopless paths of q, cheapest first
// (fewer hops, then lower node numbers, on equal cost), by Yen's
// algorithm [Y71] with Lawler's saving: the spur nodes of a path start
// at the node where it left the path it was derived from, the earlier
// ones having been tried already. Each spur search is an A* guided by the
// exact distances to To and pruned by the cost and hop bounds, so that a
// candidate outside them is never produced.
//
// [Y71]: J. Y. Yen, Finding the K shortest loopless paths in a network,
// Management Science 17(11), 1971.
func (s *Searcher) KShortest(q Query) []Path {
	g := s.g
	if q.K <= 0 || q.From < 0 || q.From >= g.n || q.To < 0 || q.To >= g.n || q.From == q.To {
		return nil
	}
	s.prepare(int32(q.To))
	s.qgen = nextGen(s.qgen, s.permMark)
	for _, e := range q.Avoid {
		if e >= 0 && e < len(s.permMark) {
			s.permMark[e] = s.qgen
		}
	}
	maxHops := int32(noHops)
	if q.MaxHops > 0 {
		maxHops = int32(min(q.MaxHops, noHops))
	}
	// The reverse search goes as far as the cost bound that the shortest
	// path ignoring hops and avoided edges gives, then as far as the one
	// the shortest path found gives.
	s.grow(int32(q.From), math.Inf(-1))
	if s.settled[q.From] != s.rgen {
		return nil
	}
	s.grow(int32(q.From), costBound(s.dist[q.From], q.Factor, q.Spread))
	s.gen = nextGen(s.gen, s.nodeMark, s.edgeMark)
	li := s.shortest(int32(q.From), limits{maxCost: math.Inf(1), maxHops: maxHops})
	if li < 0 {
		return nil
	}
	nodes, edges := s.walk(li)
	first := candidate{Path: Path{Nodes: nodes, Edges: edges, Cost: s.labels[li].g}}
	bound := costBound(first.Cost, q.Factor, q.Spread)
	s.grow(int32(q.From), bound)
	found := []candidate{first}
	seen := map[string]bool{pathKey(nodes): true}
	var pending []candidate
	for len(found) < q.K {
		last := found[len(found)-1]
		rootCost := 0.0
		for _, e := range last.Edges[:last.dev] {
			rootCost += g.weight[e]
		}
		for i := last.dev; i < len(last.Nodes)-1; i++ {
			s.gen = nextGen(s.gen, s.nodeMark, s.edgeMark)
			for _, n := range last.Nodes[:i] {
				s.nodeMark[n] = s.gen
			}
			root := last.Nodes[:i+1]
			for _, p := range found {
				if len(p.Nodes) > i+1 && slices.Equal(p.Nodes[:i+1], root) {
					s.edgeMark[p.Edges[i]] = s.gen
				}
			}
			li := s.shortest(last.Nodes[i], limits{rootCost: rootCost, rootHops: int32(i), maxCost: bound, maxHops: maxHops})
			if li >= 0 {
				nodes, edges := s.walk(li)
				c := candidate{dev: i, Path: Path{
					Nodes: append(slices.Clip(last.Nodes[:i]), nodes...),
					Edges: append(slices.Clip(last.Edges[:i]), edges...),
					Cost:  rootCost + s.labels[li].g,
				}}
				if k := pathKey(c.Nodes); !seen[k] {
					seen[k] = true
					pending = append(pending, c)
				}
			}
			rootCost += g.weight[last.Edges[i]]
		}
		if len(pending) == 0 {
			break
		}
		best := 0
		for i := range pending {
			if comparePaths(pending[i].Path, pending[best].Path) < 0 {
				best = i
			}
		}
		found = append(found, pending[best])
		pending = slices.Delete(pending, best, best+1)
	}
	out := make([]Path, len(found))
	for i, c := range found {
		out[i] = c.Path
	}
	return out
}

// candidate is a path of Yen's algorithm with the index of the node where
// it left the path it was derived from.
type candidate struct {
	Path
	dev int
}

// costBound is the most a path may cost given the shortest one's cost d,
// with a little slack for the sums' rounding.
func costBound(d, factor, spread float64) float64 {
	b := math.Inf(1)
	if factor >= 1 {
		b = factor * d
	}
	if spread > 0 {
		b = min(b, d+spread)
	}
	return b + 1e-9*max(1, math.Abs(b))
}

// comparePaths orders paths by cost, then hops, then nodes.
func comparePaths(a, b Path) int {
	return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(len(a.Nodes), len(b.Nodes)), slices.Compare(a.Nodes, b.Nodes))
}

func pathKey(nodes []int32) string {
	b := make([]byte, 0, 4*len(nodes))
	for _, n := range nodes {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	return string(b)
}
