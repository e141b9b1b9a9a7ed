package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
	"github.com/amptcp/amptcp/pm"
)

// PMSetting is a value of the pm dimension.
type PMSetting struct {
	Policy pm.Policy
	// Subflows of the subflows and ndiffports policies.
	Subflows int
	// TCP: the flows are plain TCP; the hosts' policy is default.
	TCP bool
	// Backup turns the path manager's backup policy on (a value that
	// ends with "backup": "subflows 2 backup").
	Backup bool
}

// maxSubflows is the kernel's limit of subflows per connection (the
// lab's hosts have it as `ip mptcp limits`), plus the first.
const maxSubflows = 9

// ParsePM reads a pm value: amptcp, fullmesh, default, tcp, "subflows
// N", "ndiffports N", binder (a subflow per gateway of the site) or
// "binder N".
func ParsePM(s string) (PMSetting, error) {
	f := strings.Fields(s)
	if len(f) > 1 && f[len(f)-1] == "backup" && f[0] != "tcp" {
		setting, err := ParsePM(strings.Join(f[:len(f)-1], " "))
		setting.Backup = true
		return setting, err
	}
	switch {
	case len(f) == 1 && f[0] == "tcp":
		return PMSetting{Policy: pm.PolicyDefault, TCP: true}, nil
	case len(f) == 1 && slices.Contains([]pm.Policy{pm.PolicyAMPTCP, pm.PolicyFullmesh, pm.PolicyDefault, pm.PolicyBinder}, pm.Policy(f[0])):
		return PMSetting{Policy: pm.Policy(f[0])}, nil
	case len(f) == 2 && slices.Contains([]pm.Policy{pm.PolicySubflows, pm.PolicyNdiffports, pm.PolicyBinder}, pm.Policy(f[0])):
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 || n > maxSubflows {
			return PMSetting{}, fmt.Errorf("%q: the number of subflows is 1 to %d", s, maxSubflows)
		}
		return PMSetting{Policy: pm.Policy(f[0]), Subflows: n}, nil
	}
	return PMSetting{}, fmt.Errorf("%q is not one of amptcp, subflows N, fullmesh, ndiffports N, binder, binder N, default, tcp (any but tcp may end with backup)", s)
}

// TopologyFor is the topology of a variant's runs: named after the
// scenario, with the variant's path manager on the hosts that open
// stream flows (their other pm settings kept), its ELPs, binding and
// scheduler, the calibrated links' values, and the variant's events as
// its timeline. The scenario's topology is not changed.
func (s *Scenario) TopologyFor(v Variant) *topo.Topology {
	t := *s.Topo
	t.Name = s.Name
	t.Nodes = slices.Clone(s.Topo.Nodes)
	t.Sites = slices.Clone(s.Topo.Sites)
	t.Links = slices.Clone(s.Topo.Links)
	t.Timeline = s.Events(v) // for the record: the runner applies them
	if val := v.Get(DimELPs); val != "" {
		n, _ := strconv.Atoi(val) // validated
		for i := range t.Sites {
			if len(t.Sites[i].ELPs) > 0 {
				t.Sites[i].ELPs = t.Sites[i].ELPs[:n:n]
			}
		}
	}
	if val := v.Get(DimBinding); val != "" {
		for i := range t.Nodes {
			if t.Nodes[i].Role == topo.RoleXTR {
				t.Nodes[i].MPTCPSubflows = Bindings[val]
				if val == "port-sum" {
					t.Nodes[i].PathSelection = "port-sum"
				}
			}
		}
	}
	if val := v.Get(DimScheduler); val != "" {
		t.Hosts.Scheduler = val
	}
	s.applyCalibrated(&t)
	val := v.Get(DimPM)
	if val == "" {
		return &t
	}
	setting, _ := ParsePM(val) // validated
	clients := map[string]bool{}
	for _, f := range s.pairs(v) {
		clients[f.From] = clients[f.From] || f.Kind != KindBackground
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !clients[n.Name] {
			continue
		}
		cfg := pm.Config{}
		if n.PM != nil {
			cfg = *n.PM
		}
		cfg.Policy, cfg.Subflows = setting.Policy, setting.Subflows
		cfg.Backup.Enabled = cfg.Backup.Enabled || setting.Backup
		n.PM = &cfg
	}
	return &t
}

// Events are the timeline events of a variant's runs, in the order of
// their times: the failure's, the topology's timeline when the matrix
// has no failure dimension, none for "none".
func (s *Scenario) Events(v Variant) []topo.Event {
	var evs []topo.Event
	switch name := v.Get(DimFailure); {
	case s.Variants.Dimension(DimFailure) == nil, name == "timeline":
		evs = slices.Clone(s.Topo.Timeline)
	case name != "none":
		evs = slices.Clone(s.Failures[name])
	}
	slices.SortStableFunc(evs, func(a, b topo.Event) int { return int(a.At.Duration - b.At.Duration) })
	return evs
}

// flows are a variant's flows: the scenario's, and its flow set's.
func (s *Scenario) flows(v Variant) []Flow {
	if set := v.Get(DimFlows); set != "" {
		return append(slices.Clone(s.Flows), s.FlowSets[set]...)
	}
	return s.Flows
}

// pairs are a variant's flows with each all-to-all flow expanded into
// its flows, one per ordered pair of its hosts, named by lab/traffic's
// AllToAll.
func (s *Scenario) pairs(v Variant) []Flow {
	var out []Flow
	for _, f := range s.flows(v) {
		if f.Between == nil {
			out = append(out, f)
			continue
		}
		ends := make([]traffic.Endpoint, len(f.Between))
		for i, h := range f.Between {
			ends[i] = traffic.Endpoint{Name: h}
		}
		for _, p := range traffic.AllToAll(ends, traffic.Flow{ID: f.Name}) {
			pf := f
			pf.Name, pf.From, pf.To, pf.Between = p.Flow.ID, p.From.Name, p.To.Name, nil
			out = append(out, pf)
		}
	}
	return out
}

// Planned is a flow of a run, ready for lab/traffic: its ends and the
// traffic flows it carries, one after the other (a transfer series has
// one per size; an iperf3 flow has one of kind traffic.Iperf3, which the
// runner gives to iperf3, not to lab/traffic).
type Planned struct {
	Flow
	// Port is the server's port: BasePort plus the flow's index (among
	// the flows with the all-to-all ones expanded).
	Port    int
	Traffic []traffic.Flow
}

// BasePort is the first flow's server port; WarmupPort serves the
// exchange that warms the LISP map-caches before the flows.
const (
	BasePort   = 5001
	WarmupPort = 5000
)

// CongestionControls lists the congestion controls the scenario's stream
// flows use, by their kernel names, each once.
func (s *Scenario) CongestionControls() []string {
	var out []string
	for _, v := range s.Variants.Matrix() {
		for _, p := range s.Plan(v) {
			for _, f := range p.Traffic {
				if f.CongestionControl != "" && !slices.Contains(out, f.CongestionControl) {
					out = append(out, f.CongestionControl)
				}
			}
		}
	}
	return out
}

// Plan returns the flows of a variant's runs.
func (s *Scenario) Plan(v Variant) []Planned {
	pmv, _ := ParsePM(v.Get(DimPM))
	ccName := cc.KernelName(v.Get(DimCC))
	var sizes []int64
	if s.Sizes != nil {
		sizes, _ = s.Sizes.Bytes()
	}
	flows := s.pairs(v)
	out := make([]Planned, len(flows))
	for i, f := range flows {
		p := Planned{Flow: f, Port: BasePort + i}
		base := traffic.Flow{ID: f.Name, Protocol: traffic.MPTCP, CongestionControl: cc.KernelName(f.CC)}
		if f.Protocol == "tcp" || pmv.TCP {
			base.Protocol = traffic.TCP
		}
		if ccName != "" {
			base.CongestionControl = ccName
		}
		if f.Direction == "download" {
			base.Direction = traffic.Download
		}
		switch f.Kind {
		case KindTransfer:
			base.Kind = traffic.Transfer
			if f.Size != "" {
				base.Bytes, _ = topo.ParseSize(f.Size)
				p.Traffic = []traffic.Flow{base}
				break
			}
			for _, n := range sizes {
				t := base
				t.ID, t.Bytes = f.Name+"/"+topo.FormatSize(n), n
				p.Traffic = append(p.Traffic, t)
			}
		case KindSaturated:
			base.Kind, base.Duration = traffic.Saturate, f.Duration.Duration
			p.Traffic = []traffic.Flow{base}
		case KindIperf3:
			base.Kind, base.Duration = traffic.Iperf3, f.Duration.Duration
			p.Traffic = []traffic.Flow{base}
		case KindBackground:
			rate, _ := topo.ParseRate(f.Rate)
			p.Traffic = []traffic.Flow{{ID: f.Name, Kind: traffic.Background, Rate: rate, Duration: f.Duration.Duration}}
		}
		out[i] = p
	}
	return out
}
