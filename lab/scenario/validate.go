package scenario

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/topo"
)

func fieldErr(path, format string, args ...any) config.FieldError {
	return config.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// nameRE is what the scenario's name looks like: it goes into namespace
// and directory names, as a topology's does.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Validate returns every problem of the scenario at once, as
// config.Errors. The topology must be loaded (Parse does it).
func (s *Scenario) Validate() error {
	var errs config.Errors
	add := func(path, format string, args ...any) { errs = append(errs, fieldErr(path, format, args...)) }
	addAll := func(list []error) {
		for _, e := range list {
			var fe config.FieldError
			if errors.As(e, &fe) {
				errs = append(errs, fe)
			}
		}
	}
	if !nameRE.MatchString(s.Name) {
		add("name", "%q is not a name of lowercase letters, digits and dashes, at most 32 long", s.Name)
	}
	if s.Repetitions < 1 {
		add("repetitions", "need at least 1, have %d", s.Repetitions)
	}
	if s.Timeout != nil && s.Timeout.Duration <= 0 {
		add("timeout", "need a positive duration")
	}
	if s.Sizes != nil {
		_, problems := s.Sizes.Bytes()
		addAll(problems)
	}
	hasCC := s.Variants.Dimension(DimCC) != nil
	names := map[string]bool{}
	for i := range s.Flows {
		addAll(s.validateFlow(fmt.Sprintf("flows[%d]", i), &s.Flows[i], hasCC, names))
	}
	for _, set := range sortedKeys(s.FlowSets) {
		setNames := maps.Clone(names)
		if len(s.FlowSets[set]) == 0 && len(s.Flows) == 0 {
			add("flow-sets."+set, "no flows, and the scenario has none of its own")
		}
		for i := range s.FlowSets[set] {
			addAll(s.validateFlow(fmt.Sprintf("flow-sets.%s[%d]", set, i), &s.FlowSets[set][i], hasCC, setNames))
		}
	}
	if (len(s.FlowSets) > 0) != (s.Variants.Dimension(DimFlows) != nil) {
		add("flow-sets", "flow sets and a flows dimension of the variants go together")
	}
	if len(s.Flows) == 0 && len(s.FlowSets) == 0 {
		add("flows", "missing: a run needs at least one flow")
	}
	addAll(s.validateFailures())
	addAll(s.validateVariants())
	for i := range s.Calibrate {
		addAll(s.Calibrate[i].validate(fmt.Sprintf("calibrate[%d]", i), s))
	}
	dims := claims.Dimensions{}
	for _, d := range s.Variants.Dims {
		dims[d.Name] = d.Values
	}
	var flows []string // nil: not checked, the flows are wrong already
	switch {
	case s.fullVariants != nil:
		for _, d := range s.fullVariants.Dims {
			dims[d.Name] = append(slices.Clone(dims[d.Name]), d.Values...)
		}
	case len(errs) == 0:
		flows = s.FlowNames()
	}
	errs = append(errs, claims.Validate("claims", s.Claims, dims, flows)...)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// FlowNames are the names the flows of every variant have in the
// records: a transfer series' "<name>/<size>", an all-to-all pattern's
// "<name>/<from>><to>".
func (s *Scenario) FlowNames() []string {
	var out []string
	for _, v := range s.Variants.Matrix() {
		for _, p := range s.Plan(v) {
			for _, f := range p.Traffic {
				if !slices.Contains(out, f.ID) {
					out = append(out, f.ID)
				}
			}
		}
	}
	return out
}

func (s *Scenario) host(name string) bool {
	for _, n := range s.Topo.Nodes {
		if n.Name == name {
			return n.Role == topo.RoleHost
		}
	}
	return false
}

// linkOf says whether the named link has node as one of its ends.
func (s *Scenario) linkOf(node, link string) bool {
	for _, l := range s.Topo.Links {
		if l.Name == link && slices.Contains(l.Ends, node) {
			return true
		}
	}
	return false
}

func (s *Scenario) validateFlow(path string, f *Flow, hasCC bool, names map[string]bool) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fieldErr(path+"."+field, format, args...))
	}
	switch {
	case f.Name == "":
		add("name", "missing")
	case strings.ContainsAny(f.Name, "/ ") || len(f.Name) > 64:
		add("name", "%q: at most 64 bytes, no slash or space", f.Name)
	case names[f.Name]:
		add("name", "%q is the name of another flow", f.Name)
	}
	names[f.Name] = true
	if f.Between != nil {
		if f.From != "" || f.To != "" {
			add("between", "an all-to-all flow has between, not from and to")
		}
		if len(f.Between) < 2 {
			add("between", "needs at least two hosts")
		}
		for i, h := range f.Between {
			switch {
			case !s.host(h):
				add(fmt.Sprintf("between[%d]", i), "%q is not a host of the topology", h)
			case slices.Index(f.Between, h) < i:
				add(fmt.Sprintf("between[%d]", i), "%q is there twice", h)
			}
		}
	} else {
		for _, end := range []struct{ field, node string }{{"from", f.From}, {"to", f.To}} {
			if !s.host(end.node) {
				add(end.field, "%q is not a host of the topology", end.node)
			}
		}
		if f.From == f.To && f.From != "" {
			add("to", "the flow's two ends are the same host")
		}
	}
	if f.At.Duration < 0 {
		add("at", "must not be negative")
	}
	for _, end := range []struct{ field, node, link string }{{"from-link", f.From, f.FromLink}, {"to-link", f.To, f.ToLink}} {
		if end.link == "" {
			continue
		}
		if f.Between != nil {
			add(end.field, "an all-to-all flow uses each host's first link")
		} else if !s.linkOf(end.node, end.link) {
			add(end.field, "%q is not a link of %s", end.link, end.node)
		}
	}
	if d := f.ConnectTimeout; d != nil && d.Duration <= 0 {
		add("connect-timeout", "must be positive")
	}
	stream := f.Kind == KindTransfer || f.Kind == KindSaturated || f.Kind == KindIperf3
	switch f.Kind {
	case KindTransfer:
		if f.Size != "" {
			if _, err := topo.ParseSize(f.Size); err != nil {
				add("size", "%v", err)
			}
		} else if s.Sizes == nil {
			add("size", "missing, and the scenario has no sizes")
		}
		if f.Duration != nil || f.Rate != "" {
			add("kind", "a transfer has a size, not a duration or a rate")
		}
	case KindSaturated:
		if f.Duration == nil || f.Duration.Duration <= 0 {
			add("duration", "a saturated flow needs a positive duration")
		}
		if f.Size != "" || f.Rate != "" {
			add("kind", "a saturated flow has a duration, not a size or a rate")
		}
	case KindBackground:
		if f.Duration == nil || f.Duration.Duration <= 0 {
			add("duration", "a background flow needs a positive duration")
		}
		if _, err := topo.ParseRate(f.Rate); err != nil {
			add("rate", "%v", err)
		}
		if f.Size != "" || f.CC != "" || f.Protocol != "" || f.Direction != "" {
			add("kind", "a background flow (UDP) has a rate and a duration, not a size, cc, protocol or direction")
		}
	case KindIperf3:
		// iperf3 -t takes whole seconds.
		if d := f.Duration; d == nil || d.Duration < time.Second || d.Duration%time.Second != 0 {
			add("duration", "an iperf3 flow needs a duration of whole seconds (iperf3 -t), at least 1s")
		}
		if f.Size != "" || f.Rate != "" {
			add("kind", "an iperf3 flow has a duration, not a size or a rate")
		}
	default:
		add("kind", "%q is not one of transfer, saturated, background, iperf3", f.Kind)
	}
	if !stream {
		return errs
	}
	if !slices.Contains([]string{"upload", "download"}, f.Direction) {
		add("direction", "%q is not one of upload, download", f.Direction)
	}
	if !slices.Contains([]string{"mptcp", "tcp"}, f.Protocol) {
		add("protocol", "%q is not one of mptcp, tcp", f.Protocol)
	}
	if f.CC == "" && !hasCC {
		add("cc", "missing, and the variants have no cc dimension (the kernel's default is bbr: set it explicitly)")
	} else if f.CC != "" && !ccRE.MatchString(f.CC) {
		add("cc", "%q is not a congestion control name", f.CC)
	}
	return errs
}

// ccRE is what a congestion control's name looks like (TCP_CA_NAME_MAX
// is 16 with its NUL).
var ccRE = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)

// validateFailures checks each failure's pattern, and its events as
// the topology checks its timeline, named by their path in the scenario.
func (s *Scenario) validateFailures() []error {
	var errs []error
	for _, name := range sortedKeys(s.FailureSpecs) {
		path := "failures." + name
		if name == "none" || name == "timeline" || !failureRE.MatchString(name) {
			errs = append(errs, fieldErr(path, "not a failure's name (none and timeline are taken)"))
			continue
		}
		if p := s.FailureSpecs[name].Pattern; p != nil {
			if pe := p.validate(path); len(pe) > 0 {
				errs = append(errs, pe...)
				continue
			}
		}
		if len(s.Failures[name]) == 0 {
			errs = append(errs, fieldErr(path, "no events"))
			continue
		}
		t := *s.Topo
		t.Timeline = s.Failures[name]
		err := t.Validate()
		var list config.Errors
		if errors.As(err, &list) {
			for _, fe := range list {
				if rest, ok := strings.CutPrefix(fe.Path, "timeline"); ok {
					if s.FailureSpecs[name].Pattern != nil {
						rest = " (its events" + rest + ")"
					}
					errs = append(errs, fieldErr(path+rest, "%s", fe.Msg))
				}
			}
		}
	}
	return errs
}

func (s *Scenario) validateVariants() []error {
	var errs []error
	seen := map[string]bool{}
	elps := s.elpCount()
	for _, d := range s.Variants.Dims {
		path := "variants." + d.Name
		if seen[d.Name] {
			errs = append(errs, fieldErr(path, "a second %s dimension", d.Name))
		}
		seen[d.Name] = true
		if !slices.Contains(Dimensions, d.Name) {
			errs = append(errs, fieldErr(path, "unknown dimension (%s)", strings.Join(Dimensions, ", ")))
			continue
		}
		if len(d.Values) == 0 {
			errs = append(errs, fieldErr(path, "no values"))
		}
		for i, v := range d.Values {
			vpath := fmt.Sprintf("%s[%d]", path, i)
			var err error
			switch d.Name {
			case DimMode:
				if !modeRE.MatchString(v) {
					err = fmt.Errorf("%q is not a mode's name (letters, digits, -, _ and +, at most 32)", v)
				}
			case DimPM:
				_, err = ParsePM(v)
			case DimCC:
				if !ccRE.MatchString(v) {
					err = fmt.Errorf("%q is not a congestion control name", v)
				}
			case DimScheduler:
				if !ccRE.MatchString(v) {
					err = fmt.Errorf("%q is not a scheduler's name", v)
				}
			case DimFailure:
				if _, ok := s.FailureSpecs[v]; !ok && v != "none" && v != "timeline" {
					err = fmt.Errorf("%q is none, timeline or a name of failures (%s)", v, strings.Join(sortedKeys(s.FailureSpecs), ", "))
				}
			case DimFlows:
				if _, ok := s.FlowSets[v]; !ok {
					err = fmt.Errorf("%q is not a name of flow-sets (%s)", v, strings.Join(sortedKeys(s.FlowSets), ", "))
				}
			case DimELPs:
				n, perr := strconv.Atoi(v)
				switch {
				case elps < 0:
					err = fmt.Errorf("no site of the topology has ELPs")
				case perr != nil || n < 0 || n > elps:
					err = fmt.Errorf("%q is not a number of ELPs from 0 (the sites' RLOCs) to %d (the fewest a site has)", v, elps)
				}
			case DimBinding:
				if _, ok := Bindings[v]; !ok {
					err = fmt.Errorf("%q is not port-sum, stateless or stateful", v)
				}
			}
			if err != nil {
				errs = append(errs, fieldErr(vpath, "%v", err))
			}
		}
	}
	return errs
}

// failureRE is what a failure's name looks like: a name, with dots
// too (loss-0.5).
var failureRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,31}$`)

// modeRE is what a mode's name looks like: a paper's (SD, SL2, SF+).
var modeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_+-]{0,31}$`)

// elpCount is the fewest ELPs a site with ELPs has, -1 when none has.
func (s *Scenario) elpCount() int {
	n := -1
	for _, site := range s.Topo.Sites {
		if len(site.ELPs) > 0 && (n < 0 || len(site.ELPs) < n) {
			n = len(site.ELPs)
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
