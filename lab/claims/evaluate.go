package claims

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// Verdict is what the experiment says of a claim.
type Verdict string

// The verdicts.
const (
	// Pass: the value is in the claim's range (and the test's p-value
	// in its own).
	Pass Verdict = "PASS"
	// Fail: it is not.
	Fail Verdict = "FAIL"
	// NotRun: the runs it needs were not run (their variant needs what
	// the machine lacks), failed, or gave no sample; Reason says which.
	NotRun Verdict = "NOT RUN"
)

// Result is a claim as the experiment measured it: what summary.json
// carries for each claim. Value, Low and High are absent when there is
// none (NOT RUN, or too few samples for an interval).
type Result struct {
	ID      string  `json:"id"`
	Figure  string  `json:"figure"`
	Says    string  `json:"says,omitempty"`
	Note    string  `json:"note,omitempty"`
	Verdict Verdict `json:"verdict"`
	// What is the comparison in words: "goodput of mode=SL2 / mode=SD".
	What  string   `json:"what"`
	Unit  string   `json:"unit"`
	Value *float64 `json:"value,omitempty"`
	Low   *float64 `json:"ci_low,omitempty"`
	High  *float64 `json:"ci_high,omitempty"`
	Range Range    `json:"range"`
	// N and NOver count the samples of Of and Over (flows; groups for a
	// per-flow ratio, pairs for a correlation).
	N     int `json:"n"`
	NOver int `json:"n_over,omitempty"`
	// P is the Mann-Whitney p-value when the claim asks for it, with
	// its range.
	P      *float64 `json:"p,omitempty"`
	PRange *Range   `json:"p_range,omitempty"`
	// Reason says why a claim was not run, or what a reader should know
	// of its samples (runs that failed, flows without a sample).
	Reason string `json:"reason,omitempty"`
}

// Evaluate measures every claim in the results. It never fails: a claim
// that cannot be measured is NOT RUN with the reason.
func Evaluate(res *results.Results, list []Claim) []Result {
	ev := NewEvaluator(list)
	for _, run := range res.Runs {
		ev.AddRun(run, res.Records[run.ID])
	}
	return ev.Results()
}

// Evaluator measures claims run by run, keeping only each run's samples
// (not its records), so that the runner can show the claims as they
// stand after every run of a long experiment.
type Evaluator struct {
	claims []Claim
	// sides are each claim's sample sets: of, over, with.
	sides [][3]*sampleSet
}

// NewEvaluator returns an Evaluator of the claims (validated).
func NewEvaluator(list []Claim) *Evaluator {
	ev := &Evaluator{claims: make([]Claim, len(list)), sides: make([][3]*sampleSet, len(list))}
	for i, c := range list {
		if c.Compare == "" {
			c.Compare = CompareValue
			if c.Over != nil {
				c.Compare = CompareRatio
			}
		}
		ev.claims[i] = c
		for j := range ev.sides[i] {
			ev.sides[i][j] = newSampleSet()
		}
	}
	return ev
}

// AddRun measures a run (its records) for every claim that selects it.
func (ev *Evaluator) AddRun(run *results.Run, recs []traffic.Record) {
	var v *runView
	if run.Error == "" && run.Skipped == "" {
		v = newRunView(run, recs)
	}
	for i, c := range ev.claims {
		s := ev.sides[i]
		s[0].add(c, c.Metric, c.Of, run, v)
		if c.Over != nil {
			s[1].add(c, c.Metric, c.Over, run, v)
		}
		if c.With != "" {
			s[2].add(c, c.With, c.Of, run, v)
		}
	}
}

// Results are the claims as the runs added so far measure them.
func (ev *Evaluator) Results() []Result {
	out := make([]Result, len(ev.claims))
	for i, c := range ev.claims {
		s := ev.sides[i]
		out[i] = evaluate(c, s[0], s[1], s[2])
	}
	return out
}

// sampleSet is the samples of one side of a claim, with what became of
// the runs selected.
type sampleSet struct {
	// values by flow name, in the order of the runs (and per run of
	// the flows).
	values  []float64
	byFlow  map[string][]float64
	byValue map[string][]float64 // by the value of the Across dimension
	keys    []sampleKey          // the run and flow of each value
	runs    int
	skipped map[string]bool // the reasons of skipped runs
	failed  int             // runs with an error
	missing int             // flows of good runs without a sample
	// each are the samples per value of the claim's Each dimension.
	each map[string]*sampleSet
}

func newSampleSet() *sampleSet {
	return &sampleSet{byFlow: map[string][]float64{}, byValue: map[string][]float64{}, skipped: map[string]bool{}}
}

type sampleKey struct{ run, flow string }

// add measures a metric on the flows a claim selects in a run, if sel
// selects the run; v is nil for a run that failed or was skipped.
func (ss *sampleSet) add(c Claim, metricName string, sel Selector, run *results.Run, v *runView) {
	m := metrics[metricName]
	if !sel.Matches(run.Variant) {
		return
	}
	if c.Each != "" {
		val := run.Variant[c.Each]
		if ss.each == nil {
			ss.each = map[string]*sampleSet{}
		}
		if ss.each[val] == nil {
			ss.each[val] = newSampleSet()
		}
		sub := c
		sub.Each = ""
		ss.each[val].add(sub, metricName, sel, run, v)
	}
	ss.runs++
	switch {
	case run.Skipped != "":
		ss.skipped[run.Skipped] = true
		return
	case run.Error != "":
		ss.failed++
		return
	}
	for i := range v.flows {
		f := &v.flows[i]
		if !selected(c, m, f) || (f.Error != "" && !m.failed) {
			continue
		}
		x, ok := m.measure(v, f, c.Window)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			ss.missing++
			continue
		}
		ss.values = append(ss.values, x)
		ss.byFlow[f.ID] = append(ss.byFlow[f.ID], x)
		if c.Across != "" {
			ss.byValue[run.Variant[c.Across]] = append(ss.byValue[run.Variant[c.Across]], x)
		}
		ss.keys = append(ss.keys, sampleKey{run.ID, f.ID})
	}
}

// selected says whether a claim measures a flow: the one it names, or
// every flow of a kind its metric applies to.
func selected(c Claim, m metric, f *results.Flow) bool {
	if c.Flow != "" {
		return flowMatches(c.Flow, f.ID)
	}
	return slices.Contains(m.kinds, f.Kind) || (f.Kind == 0 && m.failed)
}

// notRun says why a side has no samples, or "" when it has some.
func (ss *sampleSet) notRun(side string, sel Selector) string {
	switch {
	case len(ss.values) > 0:
		return ""
	case ss.runs == 0:
		return fmt.Sprintf("no run of %s in the results", sel)
	case len(ss.skipped) > 0:
		return strings.Join(sortedKeys(ss.skipped), "; ")
	case ss.failed == ss.runs:
		return fmt.Sprintf("the %d runs of %s failed", ss.runs, sel)
	}
	return fmt.Sprintf("%s: no flow of %s gave a sample (%d runs, %d failed)", side, sel, ss.runs, ss.failed)
}

// remark notes what the samples leave out, for a claim that was run.
func (ss *sampleSet) remark(sel Selector) string {
	var parts []string
	if ss.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d runs of %s failed", ss.failed, ss.runs, sel))
	}
	if len(ss.skipped) > 0 {
		parts = append(parts, "some runs of "+sel.String()+" skipped: "+strings.Join(sortedKeys(ss.skipped), "; "))
	}
	if ss.missing > 0 {
		parts = append(parts, fmt.Sprintf("%d flows of %s gave no sample", ss.missing, sel))
	}
	return strings.Join(parts, "; ")
}

func evaluate(c Claim, of, over, with *sampleSet) Result {
	if c.Each != "" {
		return evaluateEach(c, of, over, with)
	}
	_, unit := MetricAbout(c.Metric)
	r := Result{ID: c.ID, Figure: c.Figure, Says: c.Says, Note: c.Note, Range: c.Range, Unit: unit, What: describe(c)}
	if why := of.notRun("of", c.Of); why != "" {
		r.Verdict, r.Reason = NotRun, why
		return r
	}
	remarks := []string{of.remark(c.Of)}
	r.N = len(of.values)
	var iv Interval
	switch c.Compare {
	case CompareValue:
		iv = meanInterval(of.values)
	case CompareShare:
		k := 0
		for _, x := range of.values {
			if c.Where.Contains(x) {
				k++
			}
		}
		iv = shareInterval(k, len(of.values))
		r.Unit = "share"
	case CompareSpread:
		var groups [][]float64
		for _, k := range sortedKeys(of.byValue) {
			groups = append(groups, of.byValue[k])
		}
		r.N = len(groups)
		if len(groups) < 2 {
			r.Verdict, r.Reason = NotRun, fmt.Sprintf("%s has %d value of %s with samples: a spread needs two", c.Of, len(groups), c.Across)
			return r
		}
		iv = bootstrapSpread(groups)
		r.Unit = "ratio"
	case CompareSpearman:
		x, y := pairs(of, with)
		r.N = len(x)
		if len(x) < 3 {
			r.Verdict, r.Reason = NotRun, fmt.Sprintf("%d flows have both %s and %s: a correlation needs 3", len(x), c.Metric, c.With)
			return r
		}
		iv = spearman(x, y)
		r.Unit = "rho"
	case CompareRatio, CompareDifference:
		if why := over.notRun("over", c.Over); why != "" {
			r.Verdict, r.Reason = NotRun, why
			return r
		}
		remarks = append(remarks, over.remark(c.Over))
		r.NOver = len(over.values)
		switch {
		case c.Per == "flow":
			var ratios []float64
			for _, name := range sortedKeys(of.byFlow) {
				if o := over.byFlow[name]; len(o) > 0 {
					ratios = append(ratios, mean(of.byFlow[name])/mean(o))
				}
			}
			if len(ratios) == 0 {
				r.Verdict, r.Reason = NotRun, "no flow has samples in both"
				return r
			}
			r.N, r.NOver = len(ratios), len(ratios)
			iv = medianInterval(ratios)
		case c.Compare == CompareRatio:
			iv = ratioInterval(of.values, over.values)
			r.Unit = "ratio"
		default:
			iv = differenceInterval(of.values, over.values)
		}
		if c.MannWhitney != nil {
			p := mannWhitney(of.values, over.values)
			r.P, r.PRange = &p, c.MannWhitney
		}
	}
	if math.IsNaN(iv.Value) {
		r.Verdict, r.Reason = NotRun, "the comparison has no value (a mean of zero)"
		return r
	}
	r.Value = &iv.Value
	if iv.HasInterval() {
		r.Low, r.High = &iv.Low, &iv.High
	}
	r.Verdict = Fail
	if c.Range.Contains(iv.Value) && (r.P == nil || r.PRange.Contains(*r.P)) {
		r.Verdict = Pass
	}
	r.Reason = joinNonEmpty(remarks)
	return r
}

// evaluateEach evaluates a claim once per value of its Each dimension:
// it passes when the share of the values that pass (of those that ran)
// is at least Holds. Its value is that share, and its reason lists each
// value's.
func evaluateEach(c Claim, of, over, with *sampleSet) Result {
	r := Result{ID: c.ID, Figure: c.Figure, Says: c.Says, Note: c.Note, Range: c.Range, Unit: "share", What: describe(c)}
	values := map[string]bool{}
	for v := range of.each {
		values[v] = true
	}
	sub := c
	sub.Each = ""
	need, _ := c.holdsShare()
	var parts, notRun []string
	ran, passed := 0, 0
	pick := func(ss *sampleSet, v string) *sampleSet {
		if ss.each[v] != nil {
			return ss.each[v]
		}
		return newSampleSet()
	}
	for _, v := range sortedKeys(values) {
		rv := evaluate(sub, pick(of, v), pick(over, v), pick(with, v))
		switch rv.Verdict {
		case NotRun:
			notRun = append(notRun, v)
			continue
		case Pass:
			passed++
		}
		ran++
		parts = append(parts, fmt.Sprintf("%s %s %s", v, rv.ValueText(), rv.Verdict))
	}
	if ran == 0 {
		r.Verdict, r.Reason = NotRun, "no value of "+c.Each+" ran"
		if len(of.skipped) > 0 {
			r.Reason = strings.Join(sortedKeys(of.skipped), "; ")
		}
		return r
	}
	share := float64(passed) / float64(ran)
	r.Value, r.N = &share, ran
	// The range shown is the share that must pass: the claim's own is
	// each value's, in What.
	low, one := need, 1.0
	if c.Holds == "any" {
		low = 1 / float64(ran)
	}
	r.Range = Range{Min: &low, Max: &one}
	r.Verdict = Fail
	if share >= need {
		r.Verdict = Pass
	}
	r.Reason = fmt.Sprintf("%d of %d values of %s passed %v (%s must): %s", passed, ran, c.Each, c.Range, holdsText(c.Holds), strings.Join(parts, ", "))
	if len(notRun) > 0 {
		r.Reason += "; not run: " + strings.Join(notRun, ", ")
	}
	return r
}

func holdsText(h string) string {
	if h == "" {
		return "all"
	}
	return h
}

// pairs are the values of two sample sets on the same run and flow.
func pairs(a, b *sampleSet) (x, y []float64) {
	idx := map[sampleKey]float64{}
	for i, k := range b.keys {
		idx[k] = b.values[i]
	}
	for i, k := range a.keys {
		if v, ok := idx[k]; ok {
			x, y = append(x, a.values[i]), append(y, v)
		}
	}
	return x, y
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func joinNonEmpty(parts []string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

// describe is the comparison in words: "goodput of mode=SL2 / mode=SD".
func describe(c Claim) string {
	m := c.Metric
	if c.Flow != "" {
		m += " of " + strings.TrimSuffix(c.Flow, "/")
	}
	if !c.Window.IsZero() {
		m += " (" + c.Window.Name + ")"
	}
	if c.Each != "" {
		m += " in " + c.Range.String() + ", for " + holdsText(c.Holds) + " of the values of " + c.Each
	}
	switch c.Compare {
	case CompareRatio:
		if c.Per == "flow" {
			return fmt.Sprintf("median per flow of %s, %s / %s", m, c.Of, c.Over)
		}
		return fmt.Sprintf("%s, %s / %s", m, c.Of, c.Over)
	case CompareDifference:
		return fmt.Sprintf("%s, %s - %s", m, c.Of, c.Over)
	case CompareSpread:
		return fmt.Sprintf("%s, %s: largest / smallest across %s", m, c.Of, c.Across)
	case CompareSpearman:
		return fmt.Sprintf("Spearman's rho of %s and %s, %s", m, c.With, c.Of)
	case CompareShare:
		return fmt.Sprintf("share of %s in %v, %s", m, c.Where, c.Of)
	}
	return fmt.Sprintf("%s, %s", m, c.Of)
}
