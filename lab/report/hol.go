package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/amptcp/amptcp/lab/traffic"
)

// The head-of-line sweep of docs/te.md: te-hol-sweep.yaml (rule 1) or
// te-hol-sweep-capacity.yaml (rule 2) runs an upload with the te role's
// head-of-line rule on (its amptcp pm plans a subflow per ELP of the
// set), te-hol-sweep-subsets.yaml the same with the first 1 to 4 ELPs
// (the rules off, pm "subflows N"), at the same points (failures: the
// fourth ELP's delay). The claim: at every point, the te role's set is
// not below the best subset.

// HoLPoint is one point of the sweep.
type HoLPoint struct {
	Point string `json:"point"`
	// Rule is the goodput with the rule on (Mbit/s), RuleSubflows the
	// most subflows its connections had: the ELPs of its set.
	Rule         Stats `json:"rule"`
	RuleSubflows int   `json:"rule_subflows"`
	// Subsets are the goodputs with the first N ELPs, by N; Best the N
	// of the highest median.
	Subsets map[int]Stats `json:"subsets"`
	Best    int           `json:"best"`
	// Holds: the rule's median is at least the best subset's, less
	// tolerance of it, or less the lower half of its 95 % interval when
	// it has one and that is wider.
	Holds bool `json:"holds"`
	// FourWorse: the four ELPs did worse than the first three, where
	// the rule should leave the fourth out (RuleSubflows 3).
	FourWorse bool `json:"four_worse"`
}

// HoLSweep evaluates the claim on the results of the two scenarios, at
// each point of the rule's results, in their order.
func HoLSweep(rule, subsets *Results, tolerance float64) ([]HoLPoint, error) {
	ruleGood, err := goodputs(rule)
	if err != nil {
		return nil, fmt.Errorf("the rule's results: %w", err)
	}
	subGood, err := goodputs(subsets)
	if err != nil {
		return nil, fmt.Errorf("subsets: %w", err)
	}
	var out []HoLPoint
	seen := map[string]bool{}
	for _, run := range rule.Runs {
		point := run.Variant["failure"]
		if seen[point] {
			continue
		}
		seen[point] = true
		p := HoLPoint{Point: point, Rule: ruleGood[variantKey{"amptcp", point}], Subsets: map[int]Stats{}}
		for k := range 4 {
			if s, ok := subGood[variantKey{"subflows " + strconv.Itoa(k+1), point}]; ok && s.N > 0 {
				p.Subsets[k+1] = s
				if p.Best == 0 || s.Median > p.Subsets[p.Best].Median {
					p.Best = k + 1
				}
			}
		}
		if p.Rule.N == 0 || p.Best == 0 {
			return nil, fmt.Errorf("point %s: no goodput of the rule or of the subsets", point)
		}
		for _, r := range rule.Runs {
			if r.Error == "" && r.Variant["failure"] == point {
				p.RuleSubflows = max(p.RuleSubflows, subflowsOf(rule.Records[r.ID]))
			}
		}
		best := p.Subsets[p.Best]
		slack := tolerance * best.Median
		if best.CILow != nil {
			slack = max(slack, best.Median-*best.CILow)
		}
		p.Holds = p.Rule.Median >= best.Median-slack
		if three, ok := p.Subsets[3]; ok {
			p.FourWorse = p.Subsets[4].Median < three.Median
		}
		out = append(out, p)
	}
	return out, nil
}

type variantKey struct{ pm, failure string }

// goodputs are the goodputs of a results directory's variants, by pm and
// failure.
func goodputs(res *Results) (map[variantKey]Stats, error) {
	s := Summarize(res)
	byName := map[string]Variant{}
	for _, v := range s.Variants {
		byName[v.Name] = v.Variant
	}
	i := slices.IndexFunc(s.Metrics, func(m MetricSummary) bool { return m.Name == "goodput" })
	if i < 0 {
		return nil, fmt.Errorf("%s has no goodput", res.Dir)
	}
	out := map[variantKey]Stats{}
	for _, r := range s.Metrics[i].Rows {
		v := byName[r.Variant]
		out[variantKey{v["pm"], v["failure"]}] = r.Stats
	}
	return out, nil
}

// subflowsOf is the most subflows a run's connections had open.
func subflowsOf(recs []traffic.Record) int {
	n := 0
	for _, r := range recs {
		if r.Kind == traffic.KindConnection {
			n = max(n, int(r.Subflows))
		}
	}
	return n
}

// WriteHoL prints the sweep as a table: each point's goodput with the
// te role's set and with the subsets (medians, Mbit/s, and the runs), and whether the
// claim holds there.
func WriteHoL(w io.Writer, pts []HoLPoint) {
	fmt.Fprintf(w, "%-8s %-16s %-10s %-10s %-10s %-10s %s\n", "point", "te set (ELPs)", "1 ELP", "2 ELPs", "3 ELPs", "4 ELPs", "claim")
	held := 0
	for _, p := range pts {
		cells := []string{fmt.Sprintf("%.1f (%d) n=%d", p.Rule.Median, p.RuleSubflows, p.Rule.N)}
		for k := 1; k <= 4; k++ {
			s := p.Subsets[k]
			mark := ""
			if k == p.Best {
				mark = "*"
			}
			cells = append(cells, fmt.Sprintf("%.1f%s n=%d", s.Median, mark, s.N))
		}
		verdict := "holds"
		if !p.Holds {
			verdict = "FAILS"
		} else {
			held++
		}
		fmt.Fprintf(w, "%-8s %-16s %-10s %-10s %-10s %-10s %s\n", p.Point, cells[0], cells[1], cells[2], cells[3], cells[4], verdict)
	}
	agree := 0
	for _, p := range pts {
		if (p.RuleSubflows == 3) == p.FourWorse {
			agree++
		}
	}
	fmt.Fprintf(w, "the te role's set is not below the best subset (*) at %d of %d points; it leaves the fourth ELP out exactly where four do worse than three at %d of %d\n",
		held, len(pts), agree, len(pts))
}
