// Package claims checks a paper's results against an experiment's: a
// scenario declares each claim (a metric of some of its variants, compared
// with a reference, and the range the paper's figure makes acceptable),
// and Evaluate measures it in a results directory and says PASS, FAIL or
// NOT RUN, with the value and its 95 % interval. `amptcp lab run`
// evaluates them after its runs, `amptcp lab report` again from the
// results; docs/lab.md ("Claims") documents the format and the
// statistics.
package claims

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
)

// Claim is one result of a paper, as a scenario file states it.
type Claim struct {
	// ID names the claim, like the paper's experiment ("000-a").
	ID string `yaml:"id"`
	// Figure is where the paper shows it ("Fig. 8"), Says what it says
	// in a line, Note what a reader of the verdict should know (a
	// stand-in, a low robustness).
	Figure string `yaml:"figure"`
	Says   string `yaml:"says"`
	Note   string `yaml:"note"`
	// Metric is measured on each flow of each run (Metrics lists them);
	// Flow chooses the flows: a flow's name, or a name ending in "/" for
	// the flows that start with it (a transfer series' sizes, an
	// all-to-all pattern's pairs); every flow the metric applies to when
	// left out. Window restricts goodput and jitter to part of the run.
	Metric string `yaml:"metric"`
	Flow   string `yaml:"flow"`
	Window Window `yaml:"window"`
	// Of selects the runs measured, Over the reference's: a value (or a
	// list of values) per dimension; a dimension left out is any value.
	Of   Selector `yaml:"of"`
	Over Selector `yaml:"over"`
	// Compare is how the value is formed (Comparisons).
	Compare string `yaml:"compare"`
	// Per: "flow" forms the comparison per flow name first (each flow's
	// mean in Of over its mean in Over) and takes their median.
	Per string `yaml:"per"`
	// Across is the dimension whose values spread compares.
	Across string `yaml:"across"`
	// Each, a dimension, makes the claim one per value of it (Of and
	// Over each restricted to that value), which Holds of them must
	// pass: all (the default), any, or a share ("1/3", "0.5").
	Each  string `yaml:"each"`
	Holds string `yaml:"holds"`
	// With is the second metric of spearman, measured on the same flows.
	With string `yaml:"with"`
	// Where is the range of values that share counts.
	Where *Range `yaml:"where"`
	// Range is what the paper accepts; MannWhitney, if set, the range the
	// p-value of the Mann-Whitney U test of Of against Over must be in
	// too ([0.05, null]: no difference shown).
	Range       Range  `yaml:"range"`
	MannWhitney *Range `yaml:"mann-whitney"`
}

// The comparisons.
const (
	// CompareValue is the mean of Of's samples.
	CompareValue = "value"
	// CompareRatio is the mean of Of's over the mean of Over's.
	CompareRatio = "ratio"
	// CompareDifference is the mean of Of's minus the mean of Over's.
	CompareDifference = "difference"
	// CompareSpread is the largest mean over the smallest among the
	// values of the Across dimension, within Of.
	CompareSpread = "spread"
	// CompareSpearman is Spearman's correlation of Metric and With over
	// Of's flows.
	CompareSpearman = "spearman"
	// CompareShare is the share of Of's samples within Where.
	CompareShare = "share"
)

// Comparisons are the values of compare.
var Comparisons = []string{CompareValue, CompareRatio, CompareDifference, CompareSpread, CompareSpearman, CompareShare}

// Selector picks runs by their variant: the dimensions it names must have
// one of its values.
type Selector map[string][]string

// UnmarshalYAML takes {pm: amptcp, cc: [cubic, reno]}: a value or a list
// per dimension.
func (s *Selector) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a mapping of dimensions to values, like {pm: amptcp}", n.Line)
	}
	*s = Selector{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		var vals []string
		switch v.Kind {
		case yaml.ScalarNode:
			vals = []string{v.Value}
		case yaml.SequenceNode:
			if err := v.Decode(&vals); err != nil {
				return err
			}
		default:
			return fmt.Errorf("line %d: %s: a value or a list of values", v.Line, k)
		}
		(*s)[k] = vals
	}
	return nil
}

// Matches says whether a variant (dimension to value) is selected.
func (s Selector) Matches(v map[string]string) bool {
	for dim, vals := range s {
		if !slices.Contains(vals, v[dim]) {
			return false
		}
	}
	return true
}

// String is "pm=amptcp cc=cubic|reno", sorted by dimension.
func (s Selector) String() string {
	if len(s) == 0 {
		return "every run"
	}
	var parts []string
	for _, k := range sortedKeys(s) {
		parts = append(parts, k+"="+strings.Join(s[k], "|"))
	}
	return strings.Join(parts, " ")
}

// Range is an interval of acceptable values: [low, high] in YAML, either
// end null for none.
type Range struct {
	Min, Max *float64
}

// UnmarshalYAML takes [1.1, 1.25], [null, 1.0] or [0.9, null].
func (r *Range) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
		return fmt.Errorf("line %d: a range is [low, high], either null for none, like [1.1, 1.25]", n.Line)
	}
	for i, e := range n.Content {
		if e.Tag == "!!null" {
			continue
		}
		f, err := strconv.ParseFloat(e.Value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("line %d: %q is not a number", e.Line, e.Value)
		}
		if i == 0 {
			r.Min = &f
		} else {
			r.Max = &f
		}
	}
	return nil
}

// MarshalJSON writes [low, high] with nulls, as the file does.
func (r Range) MarshalJSON() ([]byte, error) {
	end := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	return []byte("[" + end(r.Min) + "," + end(r.Max) + "]"), nil
}

// UnmarshalJSON reads [low, high] with nulls, as MarshalJSON writes it.
func (r *Range) UnmarshalJSON(b []byte) error {
	var ends [2]*float64
	if err := json.Unmarshal(b, &ends); err != nil {
		return fmt.Errorf("a range is [low, high]: %w", err)
	}
	r.Min, r.Max = ends[0], ends[1]
	return nil
}

// Contains says whether v is in the range, its ends included.
func (r Range) Contains(v float64) bool {
	return !math.IsNaN(v) && (r.Min == nil || v >= *r.Min) && (r.Max == nil || v <= *r.Max)
}

// String is "[1.1, 1.25]", "≤ 1", "≥ 0.9".
func (r Range) String() string {
	f := func(p *float64) string { return strconv.FormatFloat(*p, 'g', 4, 64) }
	switch {
	case r.Min != nil && r.Max != nil:
		return "[" + f(r.Min) + ", " + f(r.Max) + "]"
	case r.Min != nil:
		return "≥ " + f(r.Min)
	case r.Max != nil:
		return "≤ " + f(r.Max)
	}
	return "any"
}

// Window is part of a run's timeline, in seconds since its flows
// started: a fixed span ("20s-40s") or one placed by the run's events
// (before, during, after: WindowBefore and the others).
type Window struct {
	Name     string
	From, To time.Duration
}

// The windows placed by a run's events, as they were applied.
const (
	// WindowBefore is from the start of the flows to the first event.
	WindowBefore = "before"
	// WindowDuring is from the last down before the first up to that up:
	// while every failed link is down.
	WindowDuring = "during"
	// WindowAfter is from 5 s after the last event to the flow's end
	// ([MPTCP-failures]' recovery, as the recovery metric).
	WindowAfter = "after"
)

// settle is how long after the last event WindowAfter starts.
const settle = 5 * time.Second

var spanRE = regexp.MustCompile(`^\s*(\S+)\s*-\s*(\S+)\s*$`)

// UnmarshalYAML takes before, during, after or "FROM-TO" ("20s-40s").
func (w *Window) UnmarshalYAML(n *yaml.Node) error {
	switch v := n.Value; v {
	case WindowBefore, WindowDuring, WindowAfter:
		w.Name = v
		return nil
	}
	m := spanRE.FindStringSubmatch(n.Value)
	if m != nil {
		from, err1 := time.ParseDuration(m[1])
		to, err2 := time.ParseDuration(m[2])
		if err1 == nil && err2 == nil && from >= 0 && to > from {
			w.Name, w.From, w.To = n.Value, from, to
			return nil
		}
	}
	return fmt.Errorf("line %d: window %q is before, during, after or a span like 20s-40s", n.Line, n.Value)
}

// MarshalText writes the window as the file does.
func (w Window) MarshalText() ([]byte, error) { return []byte(w.Name), nil }

// IsZero says that no window was given: the whole flow.
func (w Window) IsZero() bool { return w.Name == "" }

// FromScenario reads the claims of a scenario file (its claims: key; the
// others are the scenario's, not read here), as a results directory's
// meta.json keeps it, for a report to evaluate them again.
func FromScenario(source []byte) ([]Claim, error) {
	var f struct {
		Claims []Claim `yaml:"claims"`
	}
	if err := yaml.Unmarshal(source, &f); err != nil {
		return nil, fmt.Errorf("the scenario's claims: %w", err)
	}
	return f.Claims, nil
}

// Dimensions are a scenario's, for Validate: each dimension's values.
type Dimensions map[string][]string

// Validate completes the claims (compare: ratio when over is given,
// value otherwise) and checks them against the scenario's dimensions and
// flow names (nil: not checked); every problem is a config.FieldError
// under path (claims[2].of.pm).
func Validate(path string, list []Claim, dims Dimensions, flows []string) config.Errors {
	var errs config.Errors
	ids := map[string]bool{}
	for i := range list {
		errs = append(errs, list[i].validate(fmt.Sprintf("%s[%d]", path, i), dims, flows, ids)...)
	}
	return errs
}

func (c *Claim) validate(path string, dims Dimensions, flows []string, ids map[string]bool) config.Errors {
	var errs config.Errors
	add := func(field, format string, args ...any) {
		errs = append(errs, config.FieldError{Path: path + "." + field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.ID == "":
		add("id", "missing: a claim is named, like the paper's experiment (000-a)")
	case ids[c.ID]:
		add("id", "%q is another claim's", c.ID)
	}
	ids[c.ID] = true
	if c.Figure == "" {
		add("figure", "missing: where the paper shows it (Fig. 8, Table 2, §4.3)")
	}
	if _, ok := metrics[c.Metric]; !ok {
		add("metric", "%q is not one of %s", c.Metric, strings.Join(MetricNames(), ", "))
	}
	if c.Flow != "" && flows != nil && !matchesAny(c.Flow, flows) {
		add("flow", "%q names no flow of the scenario (%s)", c.Flow, strings.Join(flows, ", "))
	}
	if !c.Window.IsZero() && !metrics[c.Metric].windowed {
		add("window", "%s is measured over the whole flow: only goodput and jitter take a window", c.Metric)
	}
	if c.Compare == "" {
		c.Compare = CompareValue
		if c.Over != nil {
			c.Compare = CompareRatio
		}
	}
	checkSelector := func(field string, s Selector) {
		for _, dim := range sortedKeys(s) {
			vals, ok := dims[dim]
			if !ok {
				add(field+"."+dim, "not a dimension of the variants (%s)", strings.Join(sortedKeys(dims), ", "))
				continue
			}
			for _, v := range s[dim] {
				if !slices.Contains(vals, v) {
					add(field+"."+dim, "%q is not one of its values (%s)", v, strings.Join(vals, ", "))
				}
			}
		}
	}
	checkSelector("of", c.Of)
	checkSelector("over", c.Over)
	needsOver := c.Compare == CompareRatio || c.Compare == CompareDifference
	switch {
	case !slices.Contains(Comparisons, c.Compare):
		add("compare", "%q is not one of %s", c.Compare, strings.Join(Comparisons, ", "))
	case needsOver && c.Over == nil:
		add("over", "missing: a %s compares with the runs of over", c.Compare)
	case !needsOver && c.Over != nil:
		add("over", "a %s has no reference", c.Compare)
	}
	if c.Each != "" {
		if _, ok := dims[c.Each]; !ok {
			add("each", "%q is not a dimension of the variants", c.Each)
		}
		if c.Each == c.Across {
			add("each", "a spread across %s cannot also be one per value of it", c.Across)
		}
	}
	if _, err := c.holdsShare(); err != nil {
		add("holds", "%v", err)
	} else if c.Holds != "" && c.Each == "" {
		add("holds", "only a claim with each says how many of its values must hold")
	}
	if c.Per != "" && (c.Per != "flow" || c.Compare != CompareRatio) {
		add("per", `only "flow", with compare: ratio`)
	}
	if (c.Across != "") != (c.Compare == CompareSpread) {
		add("across", "a spread, and only a spread, names the dimension it spreads across")
	} else if c.Across != "" {
		if _, ok := dims[c.Across]; !ok {
			add("across", "%q is not a dimension of the variants", c.Across)
		}
	}
	if (c.With != "") != (c.Compare == CompareSpearman) {
		add("with", "a spearman, and only a spearman, names the second metric")
	} else if _, ok := metrics[c.With]; c.With != "" && !ok {
		add("with", "%q is not one of %s", c.With, strings.Join(MetricNames(), ", "))
	}
	if (c.Where != nil) != (c.Compare == CompareShare) {
		add("where", "a share, and only a share, says which values it counts")
	}
	if c.MannWhitney != nil && c.Over == nil {
		add("mann-whitney", "the test compares of with over: give over")
	}
	if c.Range.Min == nil && c.Range.Max == nil {
		add("range", "missing: the values the paper accepts, [low, high] (either null for none)")
	} else if c.Range.Min != nil && c.Range.Max != nil && *c.Range.Min > *c.Range.Max {
		add("range", "%v is empty", c.Range)
	}
	return errs
}

// holdsShare is the share of an each claim's values that must pass:
// all (1), any (the smallest above 0), or a share given as "1/3" or
// "0.33".
func (c *Claim) holdsShare() (float64, error) {
	switch h := strings.TrimSpace(c.Holds); h {
	case "", "all":
		return 1, nil
	case "any":
		return math.SmallestNonzeroFloat64, nil
	default:
		var v float64
		var err error
		if num, den, ok := strings.Cut(h, "/"); ok {
			var n, d float64
			n, err = strconv.ParseFloat(num, 64)
			if err == nil {
				d, err = strconv.ParseFloat(den, 64)
			}
			if err == nil && d > 0 {
				v = n / d
			}
		} else {
			v, err = strconv.ParseFloat(h, 64)
		}
		if err != nil || !(v > 0 && v <= 1) {
			return 0, fmt.Errorf("%q is all, any or a share like 1/3 or 0.5", c.Holds)
		}
		return v, nil
	}
}

// matchesAny says whether a claim's flow selects one of the names.
func matchesAny(sel string, names []string) bool {
	for _, n := range names {
		if flowMatches(sel, n) {
			return true
		}
	}
	return false
}

// flowMatches says whether a flow (a record's name) is selected: its
// name, or a prefix ending in "/" of it; "" selects every flow.
func flowMatches(sel, flow string) bool {
	if sel == "" || sel == flow {
		return true
	}
	return strings.HasSuffix(sel, "/") && strings.HasPrefix(flow, sel)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
