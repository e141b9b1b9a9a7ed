package te

import (
	"cmp"
	"slices"
	"sync"
)

// Request is one set of paths to compute: the paths asked for, the rules
// to choose among them by and the ELPs other sources take towards the
// same destination.
type Request struct {
	Query Query
	Rules Rules
	Taken []Path
}

// Result is a computed set and the candidates it was chosen among.
type Result struct {
	Choice
	Candidates []Path
}

// Compute computes the sets of reqs on g, on up to workers goroutines
// (a Searcher each); the requests towards one destination go to the same
// worker, in turn, so that they share its reverse search. The results
// are in the order of reqs.
func Compute(g *Graph, reqs []Request, workers int) []Result {
	out := make([]Result, len(reqs))
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(reqs[a].Query.To, reqs[b].Query.To) })
	// Runs of the same destination, dealt out to the workers in turn.
	var runs [][]int
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && reqs[order[j]].Query.To == reqs[order[i]].Query.To {
			j++
		}
		runs = append(runs, order[i:j])
		i = j
	}
	workers = max(1, min(workers, len(runs)))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := NewSearcher(g)
			for r := w; r < len(runs); r += workers {
				for _, i := range runs[r] {
					cands := s.KShortest(reqs[i].Query)
					out[i] = Result{Choice: Choose(cands, reqs[i].Taken, reqs[i].Rules), Candidates: cands}
				}
			}
		})
	}
	wg.Wait()
	return out
}
