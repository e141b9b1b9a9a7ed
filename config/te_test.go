package config

import (
	"strings"
	"testing"
	"time"
)

// teExample is a map-server with the te role beside it: two RTRs it
// does not learn from registrations, and capacities for rule 2.
const teExample = `
roles: [map-server, map-resolver, te]
map-server:
  sites:
    - {name: a, keys: [{id: 1, secret: a}], eid-prefixes: [{prefix: 10.1.0.0/24}]}
te:
  nodes:
    - {name: r1, rlocs: [192.0.2.11, 198.51.100.11]}
    - {name: r2, rlocs: [192.0.2.12], metrics: "http://192.0.2.12:9100/metrics"}
  k: 6
  disjoint: true
  head-of-line:
    rtt-factor: 0
    capacities: [{from: "*", to: r1, rate: 20Mbit}]
`

func TestTEExample(t *testing.T) {
	c, err := Parse([]byte(teExample))
	if err != nil {
		t.Fatal(err)
	}
	te := c.TE
	if te.K != 6 || te.MaxELPs != 4 || te.MaxHops != 8 || !te.Disjoint || te.MetricsPort != 9342 ||
		te.CollectInterval.Duration != 5*time.Second || te.TTL.Duration != 5*time.Minute {
		t.Errorf("te = %+v", te)
	}
	h := te.HeadOfLine
	if *h.RTTFactor != 0 || h.MaxSpread.Duration != 40*time.Millisecond || h.ReceiveWindow != "6MiB" || h.Gain != 0.05 {
		t.Errorf("head-of-line = %+v (factor %v)", h, *h.RTTFactor)
	}
	if te.Hysteresis != (TEHysteresis{Confirm: 3, HoldDown: Duration{time.Minute}, Gain: 0.1, MinGain: Duration{2 * time.Millisecond}}) {
		t.Errorf("hysteresis = %+v", te.Hysteresis)
	}
	if got := te.Nodes[0].MetricsURL(te.MetricsPort); got != "http://192.0.2.11:9342/metrics" || te.Nodes[0].Role != "rtr" {
		t.Errorf("node r1: %s, role %s", got, te.Nodes[0].Role)
	}
	if got := te.Nodes[1].MetricsURL(te.MetricsPort); got != "http://192.0.2.12:9100/metrics" {
		t.Errorf("node r2: %s", got)
	}
	// The role alone takes the defaults, rule 1 on.
	c, err = Parse([]byte("roles: [te]\n"))
	if err != nil || *c.TE.HeadOfLine.RTTFactor != 1.5 {
		t.Fatalf("te alone: %v %+v", err, c)
	}
}

func TestTEErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"roles: [map-server]\nmap-server: {sites: [{name: a, allow-unauthenticated: true, eid-prefixes: [{prefix: 10.0.0.0/8}]}]}\nte: {}", "te: set, but the te role is not in roles"},
		{"roles: [te]\nte: {k: 17}", "te.k: 17 is not between 1 and 16"},
		{"roles: [te]\nte: {max-elps: 9}", "te.max-elps: 9 is not between 1 and 8"},
		{"roles: [te]\nte: {max-hops: 1}", "te.max-hops: 1 is not between 2"},
		{"roles: [te]\nte: {ttl: 90s}", "te.ttl: 1m30s is not a whole number of minutes"},
		{"roles: [te]\nte: {collect-interval: 10ms}", "te.collect-interval: must be at least 100ms"},
		{"roles: [te]\nte: {head-of-line: {rtt-factor: 0.5}}", "te.head-of-line.rtt-factor: 0.5: want 1 or more"},
		{"roles: [te]\nte: {head-of-line: {receive-window: lots}}", `te.head-of-line.receive-window: "lots" is not a size`},
		{"roles: [te]\nte: {head-of-line: {capacities: [{from: a, rate: fast}]}}", "te.head-of-line.capacities[0].to: missing"},
		{"roles: [te]\nte: {head-of-line: {capacities: [{from: a, to: b, rate: fast}]}}", `te.head-of-line.capacities[0].rate: "fast" is not a rate`},
		{"roles: [te]\nte: {nodes: [{name: r1, rlocs: [10.0.0.1]}, {name: r1, rlocs: [10.0.0.1]}]}", `te.nodes[1].name: "r1" is the name of another node`},
		{"roles: [te]\nte: {nodes: [{name: r1, rlocs: [10.0.0.1]}, {name: r2, rlocs: [10.0.0.1]}]}", "te.nodes[1].rlocs[0]: 10.0.0.1 is already r1's"},
		{"roles: [te]\nte: {nodes: [{name: r1, role: ms, rlocs: [x]}]}", `te.nodes[0].role: "ms" is not one of [rtr xtr]`},
		{"roles: [te]\nte: {nodes: [{name: r1, rlocs: [x]}]}", `te.nodes[0].rlocs[0]: "x" is not an IP address`},
		{"roles: [te]\nte: {nodes: [{name: r1, rlocs: [10.0.0.1], metrics: 'ftp://x'}]}", `te.nodes[0].metrics: "ftp://x" is not an http:// or https:// URL`},
		{"roles: [te]\nte: {pairs: [{source: a, destination: a}]}", `te.pairs[0].source: "a" is not the name of a node`},
		{"roles: [te]\nte: {hysteresis: {confirm: -1}}", "te.hysteresis.confirm: must be at least 1"},
		{"roles: [te]\nte: {bogus: 1}", `unknown field "bogus"`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got %v\n  want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestProbePeersAndJoin(t *testing.T) {
	base := `
roles: [xtr]
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [192.0.2.1], probe-peers: [192.0.2.11, 192.0.2.12]%s}
xtr:
  database-mappings: [{eid-prefix: 10.1.0.0/24, locators: [{address: 198.51.100.1, priority: 2}]}]
  map-servers: [{address: 192.0.2.1, secret: s}]
  join: {rtrs: [192.0.2.11, 192.0.2.12, 192.0.2.13]%s}
`
	c, err := Parse([]byte(strings.Replace(strings.Replace(base, "%s", "", 1), "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if j := c.XTR.Join; j.Count != 2 || j.Priority != 1 || j.Weight != 50 || j.Confirm != 3 || j.HoldDown.Duration != time.Minute {
		t.Errorf("join = %+v", j)
	}
	if len(c.MapCache.ProbePeers) != 2 {
		t.Errorf("probe-peers = %v", c.MapCache.ProbePeers)
	}
	for _, tc := range []struct{ probe, join, want string }{
		{", probe-interval: 0s", "", "map-cache.probe-peers: set, but probing is off"},
		{", probe-interval: 0s", "", "xtr.join: set, but probing is off"},
		{"", ", count: 8", "xtr.database-mappings[0].locators: 1 locators and 8 ELPs of the join"},
		{"", ", priority: 255", `xtr.join.priority: 255 is "do not use"`},
		{", probe-peers: [x]", "", `map-cache.probe-peers[0]: "x" is not an IP address`},
	} {
		y := strings.Replace(base, "%s", tc.probe, 1)
		y = strings.Replace(y, "%s", tc.join, 1)
		if tc.probe == ", probe-peers: [x]" {
			y = strings.Replace(y, "probe-peers: [192.0.2.11, 192.0.2.12], ", "", 1)
		}
		if _, err := Parse([]byte(y)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: got %v, want %q", tc.probe, tc.join, err, tc.want)
		}
	}
}
