package scenario

import (
	"fmt"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/topo"
)

// Failure is a named failure of the failure dimension: a list of
// timeline events, or a Pattern that makes them.
type Failure struct {
	Events  []topo.Event
	Pattern *Pattern
}

// UnmarshalYAML takes a list of events or a pattern (a mapping).
func (f *Failure) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		f.Pattern = &Pattern{}
		return decodeStrict(n, f.Pattern)
	}
	return n.Decode(&f.Events)
}

// decodeStrict decodes a node as config.Decode does a file: an unknown
// field is an error.
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	if err := config.Decode(b, v); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// Pattern is a failure as [MPTCP-failures] and [SDN-MPTCP] make them: n
// of m links fail, together or one after the other, on one side or
// both, and come back after a time or in the order they failed.
type Pattern struct {
	// Links are the links that may fail, in the order they fail; Count
	// of them fail (all when left out).
	Links []string `yaml:"links"`
	Count int      `yaml:"count"`
	// At is when the first goes down; Stagger is the time between one
	// failure and the next (0: all at once).
	At      config.Duration `yaml:"at"`
	Stagger config.Duration `yaml:"stagger"`
	// For is how long each link stays down; or Restore brings them back
	// after the last failure, first down first up. Neither: they stay
	// down.
	For     *config.Duration `yaml:"for"`
	Restore *Restore         `yaml:"restore"`
	// Side is what fails: link (the default: the link drops everything
	// and neither end notices, a failure between routers), a or b (the
	// interface of the links' first or second end goes down: that host
	// sees its port fail) or both.
	Side string `yaml:"side"`
}

// Restore brings a pattern's links back: the first After the last
// failure, the next ones Stagger apart.
type Restore struct {
	After   config.Duration `yaml:"after"`
	Stagger config.Duration `yaml:"stagger"`
}

// The sides of a pattern.
var sides = []string{"link", "a", "b", "both"}

// Expand returns the failure's events: its list, or those its pattern
// makes, in the order of their times.
func (f Failure) Expand() []topo.Event {
	p := f.Pattern
	if p == nil {
		return slices.Clone(f.Events)
	}
	n := p.Count
	if n <= 0 || n > len(p.Links) {
		n = len(p.Links)
	}
	ends := []string{""}
	switch p.Side {
	case "a", "b":
		ends = []string{p.Side}
	case "both":
		ends = []string{"a", "b"}
	}
	var evs []topo.Event
	add := func(at time.Duration, link string, action topo.Action) {
		for _, end := range ends {
			evs = append(evs, topo.Event{At: config.Duration{Duration: at}, Link: link, Action: action, End: end})
		}
	}
	last := p.At.Duration + time.Duration(n-1)*p.Stagger.Duration
	for i, link := range p.Links[:n] {
		down := p.At.Duration + time.Duration(i)*p.Stagger.Duration
		add(down, link, topo.ActionDown)
		switch {
		case p.For != nil:
			add(down+p.For.Duration, link, topo.ActionUp)
		case p.Restore != nil:
			add(last+p.Restore.After.Duration+time.Duration(i)*p.Restore.Stagger.Duration, link, topo.ActionUp)
		}
	}
	slices.SortStableFunc(evs, func(a, b topo.Event) int { return int(a.At.Duration - b.At.Duration) })
	return evs
}

// validate checks a pattern's own fields; its events are checked as a
// timeline afterwards.
func (p *Pattern) validate(path string) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fieldErr(path+"."+field, format, args...))
	}
	if len(p.Links) == 0 {
		add("links", "missing: the links that fail, in the order they do")
	}
	for i, l := range p.Links {
		if slices.Index(p.Links, l) < i {
			add(fmt.Sprintf("links[%d]", i), "%q is there twice", l)
		}
	}
	if p.Count < 0 || p.Count > len(p.Links) {
		add("count", "%d of %d links", p.Count, len(p.Links))
	}
	for field, d := range map[string]time.Duration{"at": p.At.Duration, "stagger": p.Stagger.Duration} {
		if d < 0 || d%time.Millisecond != 0 {
			add(field, "%v is not a time in whole milliseconds", d)
		}
	}
	switch {
	case p.For != nil && p.Restore != nil:
		add("for", "give for or restore, not both")
	case p.For != nil && (p.For.Duration <= 0 || p.For.Duration%time.Millisecond != 0):
		add("for", "%v is not a positive time in whole milliseconds", p.For.Duration)
	case p.Restore != nil && (p.Restore.After.Duration < 0 || p.Restore.Stagger.Duration < 0):
		add("restore", "after and stagger must not be negative")
	}
	if p.Side != "" && !slices.Contains(sides, p.Side) {
		add("side", "%q is not one of link, a, b, both", p.Side)
	}
	return errs
}
