package scenario

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/lab/topo"
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
			n, err := topo.ParseSize(s)
			if err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("sizes[%d]", i), "%v", err))
			}
			out = append(out, n)
		}
		return out, errs
	}
	first, err := topo.ParseSize(z.First)
	if err != nil {
		errs = append(errs, fieldErr("sizes.first", "%v", err))
	}
	step, err := topo.ParseSize(z.Step)
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

// Dimension is one axis of the matrix: its name (pm, cc, failure, ...)
// and its values, in the file's order.
type Dimension struct {
	Name   string
	Values []string
}

// The dimensions a matrix may have.
const (
	// DimMode names a variant, as a paper names its modes (SD, SL2): it
	// sets nothing, and claims select variants by it.
	DimMode = "mode"
	// DimPM is the path manager of the hosts that open stream flows: amptcp,
	// "subflows N", fullmesh, "ndiffports N", binder, "binder N",
	// default, or tcp (plain TCP flows, the hosts' path manager at
	// default).
	DimPM = "pm"
	// DimCC is the congestion control of every stream flow.
	DimCC = "cc"
	// DimFailure names a set of timeline events: one of the scenario's
	// failures, "timeline" (the topology's), or "none".
	DimFailure = "failure"
	// DimFlows names a flow set: the flows of flow-sets that run beside
	// the scenario's flows.
	DimFlows = "flows"
	// DimELPs is how many of its ELPs each site that has some registers
	// (its first N; 0: its RLOCs instead).
	DimELPs = "elps"
	// DimBinding is how every xTR puts MPTCP subflows on paths: port-sum
	// (the hosts' source ports choose, mptcp-subflows off), stateless
	// (the ITR binds each, mptcp-subflows bind) or stateful (the ETR
	// chooses, mptcp-subflows bind-stateful) ([LISP-TE] §III).
	DimBinding = "binding"
	// DimScheduler is the hosts' MPTCP packet scheduler.
	DimScheduler = "scheduler"
)

// Dimensions are the dimensions a matrix may have, in the order of a
// variant's name.
var Dimensions = []string{DimMode, DimPM, DimCC, DimFailure, DimFlows, DimELPs, DimBinding, DimScheduler}

// The values of the binding dimension.
var Bindings = map[string]string{"port-sum": "off", "stateless": "bind", "stateful": "bind-stateful"}

// Variants is the matrix: a mapping of dimensions to their values (every
// combination is a variant), or a list of such mappings, all with the
// same dimensions, whose variants are run in turn (a paper's modes, each
// its own combination).
type Variants struct {
	// Dims are the dimensions, in the file's order, each with every
	// value any of the matrices gives it.
	Dims []Dimension
	// matrices are the file's mappings, each with the dimensions of
	// Dims in Dims' order.
	matrices [][]Dimension
}

// UnmarshalYAML keeps the dimensions in the file's order, which sets the
// order of the runs.
func (v *Variants) UnmarshalYAML(n *yaml.Node) error {
	mapping := func(m *yaml.Node) ([]Dimension, error) {
		if m.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: variants: a mapping of dimensions (pm, cc, failure, ...) to lists of values, or a list of such mappings", m.Line)
		}
		var dims []Dimension
		for i := 0; i+1 < len(m.Content); i += 2 {
			d := Dimension{Name: m.Content[i].Value}
			val := m.Content[i+1]
			var err error
			if val.Kind == yaml.ScalarNode {
				d.Values = []string{val.Value}
			} else {
				err = val.Decode(&d.Values)
			}
			if err != nil {
				return nil, fmt.Errorf("variants.%s: %w", d.Name, err)
			}
			dims = append(dims, d)
		}
		return dims, nil
	}
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for i, item := range items {
		dims, err := mapping(item)
		if err != nil {
			return err
		}
		if i > 0 && !sameNames(dims, v.matrices[0]) {
			return fmt.Errorf("line %d: variants[%d] has other dimensions than variants[0]: every mapping of the list names the same ones", item.Line, i)
		}
		v.matrices = append(v.matrices, dims)
		for _, d := range dims {
			u := v.Dimension(d.Name)
			if u == nil {
				v.Dims = append(v.Dims, Dimension{Name: d.Name})
				u = &v.Dims[len(v.Dims)-1]
			}
			for _, val := range d.Values {
				if !slices.Contains(u.Values, val) {
					u.Values = append(u.Values, val)
				}
			}
		}
	}
	return nil
}

func sameNames(a, b []Dimension) bool {
	if len(a) != len(b) {
		return false
	}
	for _, d := range a {
		if !slices.ContainsFunc(b, func(e Dimension) bool { return e.Name == d.Name }) {
			return false
		}
	}
	return true
}

// Dimension returns the named dimension, or nil.
func (v *Variants) Dimension(name string) *Dimension {
	for i := range v.Dims {
		if v.Dims[i].Name == name {
			return &v.Dims[i]
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

// Matrix returns every variant: of each mapping in turn, every
// combination, the first dimension varying slowest (a variant two
// mappings give runs once); a scenario without dimensions has one,
// empty variant.
func (v *Variants) Matrix() []Variant {
	if len(v.matrices) == 0 {
		return []Variant{nil}
	}
	var all []Variant
	seen := map[string]bool{}
	for _, m := range v.matrices {
		out := []Variant{nil}
		for _, d := range v.Dims {
			i := slices.IndexFunc(m, func(e Dimension) bool { return e.Name == d.Name })
			var next []Variant
			for _, prefix := range out {
				for _, val := range m[i].Values {
					next = append(next, append(append(Variant(nil), prefix...), Setting{d.Name, val}))
				}
			}
			out = next
		}
		for _, x := range out {
			if !seen[x.String()] {
				seen[x.String()] = true
				all = append(all, x)
			}
		}
	}
	return all
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
