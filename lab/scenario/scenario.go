// Package scenario is the lab's experiment format: a topology, the flows
// to run on it, a matrix of variants (path manager, congestion control,
// failures) and a number of repetitions. A file is decoded strictly and
// validated with every problem named by its path (flows[1].cc); Runs
// expands it into the runs of the experiment, interleaved: every variant
// once, then every variant again, in the same order each time.
//
// The format is documented, with an example that a test loads, in
// docs/lab.md; package lab runs scenarios (lab.RunScenario).
package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/topo"
)

// Scenario is an experiment: what a scenario file holds, with its
// topology loaded.
type Scenario struct {
	// Name names the experiment and the lab it runs in (its namespaces
	// are amptcp-lab-<name>-<node>); the topology's name when left out.
	Name string `yaml:"name"`
	// Topology is the path of the topology file, relative to the
	// scenario's directory.
	Topology string `yaml:"topology"`
	Flows    []Flow `yaml:"flows"`
	// FlowSets are named sets of flows, for the flows dimension: a run
	// has the scenario's flows and its variant's set.
	FlowSets map[string][]Flow `yaml:"flow-sets"`
	// Sizes are the transfers of a transfer flow that gives no size.
	Sizes *Sizes `yaml:"sizes"`
	// Variants is the matrix of variants, by dimension.
	Variants Variants `yaml:"variants"`
	// FailureSpecs are named failures, for the failure dimension: each a
	// list of timeline events or a pattern of them (Failure); Failures
	// are their events.
	FailureSpecs map[string]Failure      `yaml:"failures"`
	Failures     map[string][]topo.Event `yaml:"-"`
	// Calibrate fits link parameters before the runs (Calibration).
	Calibrate []Calibration `yaml:"calibrate"`
	// Claims are the paper's results the experiment checks.
	Claims []claims.Claim `yaml:"claims"`
	// Short, in the file, is what the short version changes (Parse with
	// short true applies it); Short is true once it was applied.
	ShortSpec yaml.Node `yaml:"short"`
	Short     bool      `yaml:"-"`

	// calibrated are the values the runner's calibration found.
	calibrated []Calibrated
	// fullVariants are the full version's variants, in a short one.
	fullVariants *Variants
	// Repetitions of every variant (1 when left out).
	Repetitions int `yaml:"repetitions"`
	// Timeout bounds a run's flows (DefaultTimeout when left out).
	Timeout *config.Duration `yaml:"timeout"`
	// Fidelity: false skips measuring the emulated paths before each
	// run (docs/lab.md, "Fidelity"); they are measured when left out.
	Fidelity *bool `yaml:"fidelity"`

	// Source and TopologySource are the files' contents; TopologyPath
	// the topology's path as the program can open it; Topo the topology.
	Source         []byte         `yaml:"-"`
	TopologyPath   string         `yaml:"-"`
	TopologySource []byte         `yaml:"-"`
	Topo           *topo.Topology `yaml:"-"`
}

// MeasuresFidelity says whether the runner measures the emulated paths
// before each run: unless the file says fidelity: false.
func (s *Scenario) MeasuresFidelity() bool { return s.Fidelity == nil || *s.Fidelity }

// DefaultTimeout bounds a run's flows when the scenario does not say.
const DefaultTimeout = 5 * time.Minute

// FlowKind is what a flow does.
type FlowKind string

// The kinds of flows.
const (
	// KindTransfer sends a size once, or each of the scenario's sizes
	// one after the other ([A-MPTCP]'s file series).
	KindTransfer FlowKind = "transfer"
	// KindSaturated sends as fast as it can for a duration.
	KindSaturated FlowKind = "saturated"
	// KindBackground sends UDP at a rate for a duration.
	KindBackground FlowKind = "background"
	// KindIperf3 runs iperf3 for a duration (in whole seconds), through
	// mptcpize for MPTCP: a cross-check of KindSaturated (lab/iperf3).
	KindIperf3 FlowKind = "iperf3"
)

// Flow is a flow of every run: a client in one host that connects to a
// server in another.
type Flow struct {
	// Name names the flow in the records (with "/<size>" for each
	// transfer of a series).
	Name string `yaml:"name"`
	// From is the host whose client connects (or sends the datagrams),
	// To the host of the server.
	From string `yaml:"from"`
	To   string `yaml:"to"`
	// Between, instead of from and to, makes the flow an all-to-all
	// pattern: one flow from each of these hosts to each other, named
	// "<name>/<from>><to>" ([SDN-MPTCP]'s background traffic).
	Between []string `yaml:"between"`
	Kind    FlowKind `yaml:"kind"`
	// Direction of a stream flow: upload (the default: From sends) or
	// download (To sends, [A-MPTCP]'s case).
	Direction string `yaml:"direction"`
	// Protocol of a stream flow: mptcp (the default) or tcp.
	Protocol string `yaml:"protocol"`
	// CC is the congestion control of a stream flow, required unless the
	// variants have a cc dimension (which overrides it).
	CC string `yaml:"cc"`
	// Size of a transfer ("1MiB", "256KiB", "5MB"); left out, the
	// scenario's sizes.
	Size string `yaml:"size"`
	// Duration of a saturated, background or iperf3 flow.
	Duration *config.Duration `yaml:"duration"`
	// Rate of a background flow ("10Mbit").
	Rate string `yaml:"rate"`
	// At is when the flow starts, from the start of the run (0).
	At config.Duration `yaml:"at"`
	// FromLink and ToLink choose the addresses of a host with several
	// links: the client's source address is its address on FromLink,
	// the server's the To host's address on ToLink (their first links'
	// when left out).
	FromLink string `yaml:"from-link"`
	ToLink   string `yaml:"to-link"`
	// ConnectTimeout, if set, makes a flow that does not connect within
	// it an outcome (results.NotConnected, the claims' connected metric)
	// rather than a failure of the run.
	ConnectTimeout *config.Duration `yaml:"connect-timeout"`
}

// Load reads a scenario file and the topology it names, and validates
// both: the full version of the scenario.
func Load(path string) (*Scenario, error) { return LoadVersion(path, false) }

// LoadVersion loads the scenario's full version, or its short one (the
// file's short: block applied).
func LoadVersion(path string, short bool) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseVersion(data, filepath.Dir(path), short)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario's full version strictly, loads its topology
// from dir (the directory relative paths start from), and validates it;
// the error lists every problem with its path.
func Parse(data []byte, dir string) (*Scenario, error) { return ParseVersion(data, dir, false) }

// ParseVersion parses the full version, or the short one.
func ParseVersion(data []byte, dir string, short bool) (*Scenario, error) {
	var s Scenario
	if err := config.Decode(data, &s); err != nil {
		return nil, err
	}
	if short {
		if s.ShortSpec.Kind == 0 {
			return nil, config.Errors{{Path: "short", Msg: "missing: this scenario has no short version"}}
		}
		full := s.Variants
		var err error
		if s, err = applyShort(data, s.ShortSpec); err != nil {
			return nil, err
		}
		// The claims are the full version's: one on a variant the short
		// version leaves out is not run, not wrong.
		s.fullVariants = &full
	}
	s.Source = data
	if s.Topology == "" {
		return nil, config.Errors{{Path: "topology", Msg: "missing: the path of a topology file"}}
	}
	s.TopologyPath = s.Topology
	if !filepath.IsAbs(s.TopologyPath) {
		s.TopologyPath = filepath.Join(dir, s.TopologyPath)
	}
	top, err := os.ReadFile(s.TopologyPath)
	if err != nil {
		return nil, config.Errors{{Path: "topology", Msg: err.Error()}}
	}
	s.TopologySource = top
	if s.Topo, err = topo.Parse(top); err != nil {
		return nil, fmt.Errorf("topology %s: %w", s.Topology, err)
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Defaults fills in the name, the repetitions, the timeout and the
// flows' direction and protocol.
func (s *Scenario) Defaults() {
	if s.Name == "" && s.Topo != nil {
		s.Name = s.Topo.Name
	}
	if s.Repetitions == 0 {
		s.Repetitions = 1
	}
	if s.Timeout == nil {
		s.Timeout = &config.Duration{Duration: DefaultTimeout}
	}
	flowDefaults(s.Flows)
	for _, set := range s.FlowSets {
		flowDefaults(set)
	}
	for i := range s.Calibrate {
		s.Calibrate[i].defaults()
	}
	s.Failures = map[string][]topo.Event{}
	for name, f := range s.FailureSpecs {
		evs := f.Expand()
		for i := range evs {
			if evs[i].Action == "" {
				evs[i].Action = topo.ActionSet
			}
		}
		s.Failures[name] = evs
	}
}

func flowDefaults(flows []Flow) {
	for i := range flows {
		f := &flows[i]
		if f.Kind == KindBackground {
			continue
		}
		if f.Direction == "" {
			f.Direction = "upload"
		}
		if f.Protocol == "" {
			f.Protocol = "mptcp"
		}
	}
}
