package te

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Rules are how a set of ELPs is chosen among candidate paths.
type Rules struct {
	// Max is the most paths in a set.
	Max int
	// Disjoint asks for link-disjoint ELPs, as routers need that tell
	// ELPs apart by the hop before them ([LISP-TE] §III.B.2): no two ELPs
	// of a destination start at the same router or share a link between
	// routers, whichever source they serve.
	Disjoint bool
	// Head-of-line rule 1: a path is offered only if its cost (RTT) is at
	// most Factor times the best one's (Factor ≥ 1) and at most Spread
	// above it (Spread > 0). Zero values leave the bound out.
	Factor, Spread float64
	// Head-of-line rule 2, when Window is positive and Capacity knows
	// every path's bottleneck: paths are taken in order of cost while
	// each adds at least Gain (0.05: 5 %) to the predicted throughput
	// min(Σ capacity, Window / (2·max RTT)). Window is the receivers'
	// buffer in bytes, capacities in bit/s, costs in seconds.
	Window   float64
	Gain     float64
	Capacity func(Path) float64
}

// Choice is a chosen set of paths, cheapest first, and why candidates
// were left out.
type Choice struct {
	Paths []Path
	// Spread is the differential RTT, the costliest path's cost minus the
	// cheapest's; Total the sum of their costs.
	Spread, Total float64
	// Predicted is rule 2's throughput of the set, 0 without rule 2.
	Predicted float64
	Excluded  []Exclusion
}

// Exclusion is a candidate left out, and why; Other is the path it
// conflicts with, for link-disjointness.
type Exclusion struct {
	Path   Path
	Reason string
	Other  *Path
}

// maxCandidates bounds the subset search (2^16 subsets).
const maxCandidates = 16

// Choose picks the set of ELPs among candidates (paths from one source to
// one destination, as KShortest gives them): within rule 1's bound,
// link-disjoint from each other and from the ELPs other sources use
// towards the destination (taken) when the rules ask for it, the most
// paths up to Max, and among sets of as many paths the one of least
// differential RTT, then of least total cost: the least differential RTT
// is what [LISP-TE] found throughput to follow. Rule 2 then keeps the
// cheapest paths of the set while each adds throughput. The search is
// exact: every subset of the (at most 16) candidates is weighed.
func Choose(candidates, taken []Path, r Rules) Choice {
	var c Choice
	cands := slices.Clone(candidates)
	slices.SortStableFunc(cands, func(a, b Path) int { return comparePaths(a, b) })
	if len(cands) > maxCandidates {
		for _, p := range cands[maxCandidates:] {
			c.Excluded = append(c.Excluded, Exclusion{Path: p, Reason: "beyond the candidates weighed"})
		}
		cands = cands[:maxCandidates]
	}
	var kept []Path
	for _, p := range cands {
		if r.Disjoint {
			if q, ok := conflicting(p, taken); ok {
				c.Excluded = append(c.Excluded, Exclusion{Path: p, Reason: "shares a first hop or a link with an ELP in use", Other: &q})
				continue
			}
		}
		kept = append(kept, p)
	}
	if len(kept) > 0 {
		bound := costBound(kept[0].Cost, r.Factor, r.Spread)
		n := 0
		for _, p := range kept {
			if p.Cost <= bound {
				kept[n] = p
				n++
				continue
			}
			c.Excluded = append(c.Excluded, Exclusion{Path: p, Reason: fmt.Sprintf("rule 1: RTT %s beyond %s", ms(p.Cost), ms(bound))})
		}
		kept = kept[:n]
	}
	best := bestSubset(kept, r)
	for i, p := range kept {
		if best&(1<<i) != 0 {
			c.Paths = append(c.Paths, p)
		} else {
			c.Excluded = append(c.Excluded, Exclusion{Path: p, Reason: "not in the best set"})
		}
	}
	c.rule2(r)
	c.score()
	return c
}

// bestSubset returns the subset of paths (a bit mask) with the most paths
// up to r.Max, then the least differential RTT, then the least total
// cost, then the cheapest paths, whose paths are pairwise disjoint if the
// rules ask.
func bestSubset(paths []Path, r Rules) uint32 {
	n := len(paths)
	if n == 0 || r.Max < 1 {
		return 0
	}
	var conflicts [maxCandidates]uint32
	if r.Disjoint {
		for i := range n {
			for j := range n {
				if i != j && Conflict(paths[i], paths[j]) {
					conflicts[i] |= 1 << j
				}
			}
		}
	}
	var best uint32
	bestN, bestSpread, bestTotal := 0, math.Inf(1), math.Inf(1)
	for set := uint32(1); set < 1<<n; set++ {
		k := bits.OnesCount32(set)
		if k > r.Max || k < bestN {
			continue
		}
		ok := true
		lo, hi, total := math.Inf(1), math.Inf(-1), 0.0
		for rest := set; rest != 0; rest &= rest - 1 {
			i := bits.TrailingZeros32(rest)
			if conflicts[i]&set != 0 {
				ok = false
				break
			}
			lo, hi, total = min(lo, paths[i].Cost), max(hi, paths[i].Cost), total+paths[i].Cost
		}
		if !ok {
			continue
		}
		spread := hi - lo
		better := k > bestN || spread < bestSpread-1e-12 ||
			(spread <= bestSpread+1e-12 && (total < bestTotal-1e-12 || (total <= bestTotal+1e-12 && lowerFirst(set, best))))
		if better {
			best, bestN, bestSpread, bestTotal = set, k, spread, total
		}
	}
	return best
}

// lowerFirst says whether set a takes cheaper candidates than b: the
// lowest bit where they differ is in a.
func lowerFirst(a, b uint32) bool {
	d := a ^ b
	return d != 0 && a&(d&-d) != 0
}

// rule2 keeps the cheapest paths while each adds throughput, when every
// path's capacity is known.
func (c *Choice) rule2(r Rules) {
	if r.Window <= 0 || r.Capacity == nil || len(c.Paths) == 0 {
		return
	}
	caps := make([]float64, len(c.Paths))
	for i, p := range c.Paths {
		if caps[i] = r.Capacity(p); caps[i] <= 0 {
			return
		}
	}
	predict := func(n int) float64 {
		sum := 0.0
		for _, b := range caps[:n] {
			sum += b
		}
		return min(sum, 8*r.Window/(2*c.Paths[n-1].Cost))
	}
	n := 1
	for n < len(c.Paths) && predict(n+1) >= (1+r.Gain)*predict(n) {
		n++
	}
	for _, p := range c.Paths[n:] {
		c.Excluded = append(c.Excluded, Exclusion{Path: p, Reason: fmt.Sprintf("rule 2: predicted %s with it, %s without",
			rate(predict(n+1)), rate(predict(n)))})
	}
	c.Paths = c.Paths[:n]
	c.Predicted = predict(n)
}

func (c *Choice) score() {
	c.Spread, c.Total = 0, 0
	if len(c.Paths) == 0 {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range c.Paths {
		lo, hi, c.Total = min(lo, p.Cost), max(hi, p.Cost), c.Total+p.Cost
	}
	c.Spread = hi - lo
}

// Conflict says whether two paths' ELPs (their nodes after the source)
// cannot be told apart by the hop before a router: they start at the same
// router, or share a link after it. The same ELP does not conflict with
// itself.
func Conflict(a, b Path) bool {
	if len(a.Nodes) < 2 || len(b.Nodes) < 2 || slices.Equal(a.Nodes[1:], b.Nodes[1:]) {
		return false
	}
	if a.Nodes[1] == b.Nodes[1] {
		return true
	}
	for _, e := range a.Edges[1:] {
		if slices.Contains(b.Edges[1:], e) {
			return true
		}
	}
	return false
}

func conflicting(p Path, others []Path) (Path, bool) {
	for _, q := range others {
		if Conflict(p, q) {
			return q, true
		}
	}
	return Path{}, false
}

func ms(seconds float64) string { return fmt.Sprintf("%.1f ms", seconds*1000) }

func rate(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }
