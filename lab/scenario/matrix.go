package scenario

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Sizes are the sizes of a transfer series: a list ([256KiB, 1MiB]) or
// an arithmetic series ({first: 256KiB, step: 256KiB, count: 30},
// [A-MPTCP]'s 30 files).
type Sizes struct {
	List []string
	// First, Step and Count describe a series.
	First, Step string
	Count       int
}

// UnmarshalYAML takes a list or a series; a series' unknown keys are
// errors, as everywhere else in the file.
func (z *Sizes) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		return n.Decode(&z.List)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var err error
			switch k.Value {
			case "first":
				err = v.Decode(&z.First)
			case "step":
				err = v.Decode(&z.Step)
			case "count":
				err = v.Decode(&z.Count)
			default:
				return fmt.Errorf("line %d: unknown field %q in sizes (first, step, count)", k.Line, k.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: sizes: a list of sizes or {first, step, count}", n.Line)
}

// Bytes are the sizes in bytes, in their order, or the problems (each
// with its path under "sizes").
func (z *Sizes) Bytes() ([]int64, []error) {
	var out []int64
	var errs []error
	if len(z.List) > 0 {
		for i, s := range z.List {
			n, err := ParseSize(s)
			if err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("sizes[%d]", i), "%v", err))
			}
			out = append(out, n)
		}
		return out, errs
	}
	first, err := ParseSize(z.First)
	if err != nil {
		errs = append(errs, fieldErr("sizes.first", "%v", err))
	}
	step, err := ParseSize(z.Step)
	if err != nil {
		errs = append(errs, fieldErr("sizes.step", "%v", err))
	}
	if z.Count < 1 || z.Count > maxSeries {
		errs = append(errs, fieldErr("sizes.count", "need 1 to %d, have %d", maxSeries, z.Count))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for i := range z.Count {
		out = append(out, first+int64(i)*step)
	}
	return out, nil
}

// maxSeries bounds a series, so that a typo does not make a week-long
// experiment.
const maxSeries = 1000

// Dimension is one axis of the matrix: its name (pm, cc, failure) and
// its values, in the file's order.
type Dimension struct {
	Name   string
	Values []string
}

// The dimensions a matrix may have.
const (
	// DimPM is the path manager of the hosts that open stream flows: amptcp,
	// "subflows N", fullmesh, "ndiffports N", default, or tcp (plain TCP
	// flows, the hosts' path manager at default).
	DimPM = "pm"
	// DimCC is the congestion control of every stream flow.
	DimCC = "cc"
	// DimFailure names a set of timeline events: one of the scenario's
	// failures, "timeline" (the topology's), or "none".
	DimFailure = "failure"
)

// Variants is the matrix: dimensions in the file's order.
type Variants []Dimension

// UnmarshalYAML keeps the dimensions in the file's order, which sets the
// order of the runs.
func (v *Variants) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: variants: a mapping of dimensions (pm, cc, failure) to lists of values", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		d := Dimension{Name: n.Content[i].Value}
		if err := n.Content[i+1].Decode(&d.Values); err != nil {
			return fmt.Errorf("variants.%s: %w", d.Name, err)
		}
		*v = append(*v, d)
	}
	return nil
}

// Dimension returns the named dimension, or nil.
func (v Variants) Dimension(name string) *Dimension {
	for i := range v {
		if v[i].Name == name {
			return &v[i]
		}
	}
	return nil
}

// Setting is one dimension's value in a variant.
type Setting struct {
	Dimension, Value string
}

// Variant is a point of the matrix: a value of each dimension, in the
// dimensions' order.
type Variant []Setting

// Get returns the variant's value of a dimension, "" if it has none.
func (v Variant) Get(dim string) string {
	for _, s := range v {
		if s.Dimension == dim {
			return s.Value
		}
	}
	return ""
}

// Map is the variant as a map, for the results.
func (v Variant) Map() map[string]string {
	m := make(map[string]string, len(v))
	for _, s := range v {
		m[s.Dimension] = s.Value
	}
	return m
}

// String is "pm=amptcp cc=cubic", or "default" for the empty variant.
func (v Variant) String() string {
	if len(v) == 0 {
		return "default"
	}
	var b []byte
	for i, s := range v {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%s=%s", s.Dimension, s.Value)
	}
	return string(b)
}

// Matrix returns every variant, the first dimension varying slowest; a
// scenario without dimensions has one, empty variant.
func (v Variants) Matrix() []Variant {
	out := []Variant{nil}
	for _, d := range v {
		var next []Variant
		for _, prefix := range out {
			for _, val := range d.Values {
				next = append(next, append(append(Variant(nil), prefix...), Setting{d.Name, val}))
			}
		}
		out = next
	}
	return out
}

// Run is one run of the experiment: a variant at a repetition.
type Run struct {
	// ID names the run in the results ("001", "002", ...).
	ID string
	// Index counts runs from 0 in the order they run.
	Index int
	// Repetition counts from 1.
	Repetition int
	Variant    Variant
}

// Runs are the matrix times the repetitions, interleaved: every variant
// once, in the matrix's order, then every variant again, so that a drift
// of the machine over time touches every variant alike.
func (s *Scenario) Runs() []Run {
	matrix := s.Variants.Matrix()
	total := len(matrix) * s.Repetitions
	width := max(3, len(fmt.Sprint(total)))
	var runs []Run
	for rep := 1; rep <= s.Repetitions; rep++ {
		for _, v := range matrix {
			i := len(runs)
			runs = append(runs, Run{ID: fmt.Sprintf("%0*d", width, i+1), Index: i, Repetition: rep, Variant: v})
		}
	}
	return runs
}
