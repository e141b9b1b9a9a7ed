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
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
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
	// Sizes are the transfers of a transfer flow that gives no size.
	Sizes *Sizes `yaml:"sizes"`
	// Variants is the matrix of variants, by dimension.
	Variants Variants `yaml:"variants"`
	// Failures are named sets of timeline events, for the failure
	// dimension.
	Failures map[string][]topo.Event `yaml:"failures"`
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
}

// Load reads a scenario file and the topology it names, and validates
// both.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario strictly, loads its topology from dir (the
// directory relative paths start from), and validates it; the error
// lists every problem with its path.
func Parse(data []byte, dir string) (*Scenario, error) {
	var s Scenario
	if err := config.Decode(data, &s); err != nil {
		return nil, err
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
	for i := range s.Flows {
		f := &s.Flows[i]
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
	for name, evs := range s.Failures {
		for i := range evs {
			if evs[i].Action == "" {
				evs[i].Action = topo.ActionSet
			}
		}
		s.Failures[name] = evs
	}
}

// ParseSize reads a size in bytes: "1048576", "256KiB", "1MiB", "5MB",
// "1GiB" (KB, MB, GB are powers of 1000; the unit's case does not
// matter).
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1}, {"", 1}}
	lower := strings.ToLower(strings.TrimSpace(s))
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			var n int64
			if _, err := fmt.Sscanf(strings.TrimSpace(num), "%d", &n); err != nil || n <= 0 || n > (1<<50)/u.mult ||
				fmt.Sprint(n) != strings.TrimSpace(num) {
				break
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a size like 256KiB, 1MiB or 5MB", s)
}

// FormatSize writes a size the shortest exact way: 256KiB, 3MiB, 1000B.
func FormatSize(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
