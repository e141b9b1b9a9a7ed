package config

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TE configures the te role: the traffic engineering of the overlay's
// Explicit Locator Paths from the RTTs its routers measure (docs/te.md).
type TE struct {
	// Nodes are the overlay's routers that do not register: RTRs, and
	// xTRs that the TE should know before they register or whose metrics
	// are not at their registration address.
	Nodes []TENode `yaml:"nodes"`
	// Pairs are (source, destination) xTRs, by node name, whose sets are
	// computed whether or not they ask: the pairs of a te role without a
	// map-server, which learns of none from Map-Requests.
	Pairs []TEPair `yaml:"pairs"`
	// MetricsPort is where the xTRs learnt from registrations serve their
	// metrics: http://<registration address>:<port>/metrics.
	MetricsPort uint16 `yaml:"metrics-port"`
	// CollectInterval is how often every node's RTTs are read; Interval
	// how often every active pair's set is computed again (a path going
	// down, or an RTT of a path in use moving by a quarter, does it at
	// once).
	CollectInterval Duration `yaml:"collect-interval"`
	Interval        Duration `yaml:"interval"`
	// K is how many shortest paths are weighed; MaxELPs the most a set
	// holds; MaxHops the most hops of an ELP (RTRs and the destination).
	K       int `yaml:"k"`
	MaxELPs int `yaml:"max-elps"`
	MaxHops int `yaml:"max-hops"`
	// Disjoint asks for link-disjoint ELPs: required when RTRs tell ELPs
	// apart by the hop before them (dataplane.path-id: previous-hop).
	Disjoint bool `yaml:"disjoint"`
	// Direct lets the direct path from the source xTR to the destination
	// xTR (a plain RLOC, no RTR) compete with the ELPs.
	Direct     bool         `yaml:"direct"`
	HeadOfLine HeadOfLine   `yaml:"head-of-line"`
	Hysteresis TEHysteresis `yaml:"hysteresis"`
	// TTL is the record TTL of the Map-Replies that carry the sets, in
	// whole minutes: a retired ELP keeps its path ID that long and a
	// minute more.
	TTL Duration `yaml:"ttl"`
}

// TENode is a router of the overlay.
type TENode struct {
	Name string `yaml:"name"`
	// Role is rtr (the default: a node ELPs may go through) or xtr (a
	// site's router, where ELPs start and end).
	Role string `yaml:"role"`
	// RLOCs are the node's addresses: the probes of other nodes that
	// reach one of them measure a link to it.
	RLOCs []string `yaml:"rlocs"`
	// Metrics is the URL of its metrics; http://<first RLOC>:<metrics-port>/metrics
	// when left out.
	Metrics string `yaml:"metrics"`
}

// TEPair is a (source, destination) pair of xTR node names.
type TEPair struct {
	Source      string `yaml:"source"`
	Destination string `yaml:"destination"`
}

// HeadOfLine is the head-of-line protection: no ELP is offered that
// would slow the others down.
type HeadOfLine struct {
	// Rule 1: an ELP is offered only if its RTT is at most RTTFactor times
	// the best one's (1.5) and at most MaxSpread above it (40ms). 0 turns
	// either bound off.
	RTTFactor *float64  `yaml:"rtt-factor"`
	MaxSpread *Duration `yaml:"max-spread"`
	// Rule 2, when every ELP's capacity is known from Capacities: ELPs are
	// taken by RTT while each adds Gain to the predicted throughput of
	// the set, min(Σ capacity, ReceiveWindow / (2 · the largest RTT)).
	// ReceiveWindow is the receivers' buffer ("6MiB", "4194304").
	ReceiveWindow string   `yaml:"receive-window"`
	Gain          float64  `yaml:"gain"`
	Capacities    []TELink `yaml:"capacities"`
}

// TELink is the capacity of the link from one node to another, by node
// name ("*" for any node).
type TELink struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
	Rate string `yaml:"rate"`
}

// TEHysteresis holds a set in use against noise: a better set replaces
// it after Confirm computations in a row found one, HoldDown after the
// last change, if it is better by Gain (relative) and MinGain (absolute)
// in differential or total RTT, or has more paths. A set whose path went
// down is replaced at once.
type TEHysteresis struct {
	Confirm  int      `yaml:"confirm"`
	HoldDown Duration `yaml:"hold-down"`
	Gain     float64  `yaml:"gain"`
	MinGain  Duration `yaml:"min-gain"`
}

// The te role's defaults.
const (
	DefaultTEMetricsPort     = 9342
	DefaultTECollectInterval = 5 * time.Second
	DefaultTEInterval        = 30 * time.Second
	DefaultTEK               = 8
	DefaultTEMaxELPs         = 4
	DefaultTERTTFactor       = 1.5
	DefaultTEMaxSpread       = 40 * time.Millisecond
	DefaultTEReceiveWindow   = "6MiB" // Linux's tcp_rmem maximum
	DefaultTEGain            = 0.05
	DefaultTEConfirm         = 3
	DefaultTEHoldDown        = time.Minute
	DefaultTEHysteresisGain  = 0.1
	DefaultTEMinGain         = 2 * time.Millisecond
	DefaultTETTL             = 5 * time.Minute
	// MaxTEK bounds K: the set is chosen among every subset of the K.
	MaxTEK = 16
)

func (c *Config) teDefaults() {
	if c.Has(RoleTE) && c.TE == nil {
		c.TE = &TE{}
	}
	t := c.TE
	if t == nil {
		return
	}
	if t.MetricsPort == 0 {
		t.MetricsPort = DefaultTEMetricsPort
	}
	setDuration(&t.CollectInterval, DefaultTECollectInterval)
	setDuration(&t.Interval, DefaultTEInterval)
	setDuration(&t.TTL, DefaultTETTL)
	setInt(&t.K, DefaultTEK)
	setInt(&t.MaxELPs, DefaultTEMaxELPs)
	setInt(&t.MaxHops, MaxHops)
	h := &t.HeadOfLine
	if h.RTTFactor == nil { // 0 is "off", so only a missing value gets the default
		f := DefaultTERTTFactor
		h.RTTFactor = &f
	}
	if h.MaxSpread == nil {
		h.MaxSpread = &Duration{DefaultTEMaxSpread}
	}
	setString(&h.ReceiveWindow, DefaultTEReceiveWindow)
	if h.Gain == 0 {
		h.Gain = DefaultTEGain
	}
	y := &t.Hysteresis
	setInt(&y.Confirm, DefaultTEConfirm)
	setDuration(&y.HoldDown, DefaultTEHoldDown)
	setDuration(&y.MinGain, DefaultTEMinGain)
	if y.Gain == 0 {
		y.Gain = DefaultTEHysteresisGain
	}
	for i := range t.Nodes {
		setString(&t.Nodes[i].Role, "rtr")
	}
}

func setInt(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

func (t *TE) validate(ck *checker, te bool) {
	if !te {
		ck.add("te", "set, but the te role is not in roles")
		return
	}
	if t.CollectInterval.Duration < 100*time.Millisecond {
		ck.add("te.collect-interval", "must be at least 100ms")
	}
	if t.Interval.Duration < time.Second {
		ck.add("te.interval", "must be at least 1s")
	}
	if t.TTL.Duration < time.Minute || t.TTL.Duration%time.Minute != 0 {
		ck.add("te.ttl", "%v is not a whole number of minutes (records carry minutes)", t.TTL.Duration)
	}
	if t.K < 1 || t.K > MaxTEK {
		ck.add("te.k", "%d is not between 1 and %d", t.K, MaxTEK)
	}
	if t.MaxELPs < 1 || t.MaxELPs > MaxPaths {
		ck.add("te.max-elps", "%d is not between 1 and %d (the data plane's paths per mapping)", t.MaxELPs, MaxPaths)
	}
	if t.MaxHops < 2 || t.MaxHops > MaxHops {
		ck.add("te.max-hops", "%d is not between 2 (an RTR and the destination) and %d", t.MaxHops, MaxHops)
	}
	h := t.HeadOfLine
	if f := *h.RTTFactor; f != 0 && (f < 1 || math.IsInf(f, 0) || math.IsNaN(f)) {
		ck.add("te.head-of-line.rtt-factor", "%v: want 1 or more, or 0 for no factor", f)
	}
	if h.MaxSpread.Duration < 0 {
		ck.add("te.head-of-line.max-spread", "must not be negative (0 for no bound)")
	}
	if _, err := ParseBytes(h.ReceiveWindow); err != nil {
		ck.add("te.head-of-line.receive-window", "%v", err)
	}
	if h.Gain < 0 || h.Gain > 10 {
		ck.add("te.head-of-line.gain", "%v is not between 0 and 10", h.Gain)
	}
	y := t.Hysteresis
	if y.Confirm < 1 {
		ck.add("te.hysteresis.confirm", "must be at least 1")
	}
	if y.HoldDown.Duration < 0 {
		ck.add("te.hysteresis.hold-down", "must not be negative")
	}
	if y.Gain < 0 || y.Gain > 1 {
		ck.add("te.hysteresis.gain", "%v is not between 0 and 1", y.Gain)
	}
	if y.MinGain.Duration < 0 {
		ck.add("te.hysteresis.min-gain", "must not be negative")
	}
	names := map[string]bool{}
	owner := map[netip.Addr]string{}
	for i, n := range t.Nodes {
		path := fmt.Sprintf("te.nodes[%d]", i)
		ck.unique(path+".name", "node", n.Name, names)
		if n.Name == "*" {
			ck.add(path+".name", `"*" stands for any node in capacities`)
		}
		oneOf(ck, path+".role", n.Role, "rtr", "xtr")
		if len(n.RLOCs) == 0 {
			ck.add(path+".rlocs", "missing: a node has at least one address")
		}
		for j, s := range n.RLOCs {
			a, err := netip.ParseAddr(s)
			switch {
			case err != nil:
				ck.add(fmt.Sprintf("%s.rlocs[%d]", path, j), "%q is not an IP address", s)
			case owner[a.Unmap()] != "":
				ck.add(fmt.Sprintf("%s.rlocs[%d]", path, j), "%s is already %s's", a, owner[a.Unmap()])
			default:
				owner[a.Unmap()] = n.Name
			}
		}
		if n.Metrics != "" {
			if u, err := url.Parse(n.Metrics); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ck.add(path+".metrics", "%q is not an http:// or https:// URL", n.Metrics)
			}
		}
	}
	for i, p := range t.Pairs {
		path := fmt.Sprintf("te.pairs[%d]", i)
		for _, f := range []struct{ field, name string }{{"source", p.Source}, {"destination", p.Destination}} {
			if !names[f.name] {
				ck.add(path+"."+f.field, "%q is not the name of a node in te.nodes", f.name)
			}
		}
		if p.Source == p.Destination {
			ck.add(path, "the source is the destination")
		}
	}
	for i, l := range h.Capacities {
		path := fmt.Sprintf("te.head-of-line.capacities[%d]", i)
		for _, f := range []struct{ field, name string }{{"from", l.From}, {"to", l.To}} {
			if f.name == "" {
				ck.add(path+"."+f.field, "missing: a node's name, or * for any")
			}
		}
		if _, err := ParseRate(l.Rate); err != nil {
			ck.add(path+".rate", "%v", err)
		}
	}
}

// ParseRate reads a rate in bit/s written as tc writes them: "8Mbit",
// "500kbit", "1Gbit", "1200bit" (the unit's case does not matter).
func ParseRate(s string) (float64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}
	lower := strings.ToLower(strings.TrimSpace(s))
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				break
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a rate like 8Mbit, 500kbit or 1Gbit", s)
}

// ParseBytes reads a size in bytes: "4194304", "64KB", "64KiB", "6MiB",
// "1MB".
func ParseBytes(s string) (int64, error) {
	lower := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"b", 1}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n <= 0 || n > math.MaxInt64/u.mult {
				break
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a size like 6MiB, 64KB or 4194304", s)
}

// Addrs returns the node's RLOCs (validated).
func (n TENode) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, s := range n.RLOCs {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// MetricsURL is where the node's metrics are read.
func (n TENode) MetricsURL(port uint16) string {
	if n.Metrics != "" || len(n.Addrs()) == 0 {
		return n.Metrics
	}
	return MetricsURL(n.Addrs()[0], port)
}

// MetricsURL is the metrics URL of a lispd at addr:port.
func MetricsURL(addr netip.Addr, port uint16) string {
	return "http://" + netip.AddrPortFrom(addr, port).String() + "/metrics"
}
