package topo

import (
	"slices"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/config"
)

func compileFile(t *testing.T, path string) *Plan {
	t.Helper()
	top, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(top, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTETopologies compiles the te role's lab topologies of docs: the ms
// runs the te role with the RTRs as its nodes, every lispd serves its
// metrics where the te role reads them, and the routers probe their
// overlay peers.
func TestTETopologies(t *testing.T) {
	p := compileFile(t, "../../docs/scenarios/te-paper-topology.yaml")
	ms := p.Node("ms").Lispd
	if !ms.Has(config.RoleTE) || len(ms.TE.Nodes) != 4 || ms.TE.Nodes[0].Name != "r1" || ms.TE.MetricsPort != 9342 ||
		ms.TE.CollectInterval.Duration.String() != "500ms" || ms.TE.Hysteresis.HoldDown.Duration.String() != "10s" {
		t.Fatalf("ms: roles %v te %+v", ms.Roles, ms.TE)
	}
	r1 := p.Node("r1")
	if got := ms.TE.Nodes[0].RLOCs; !slices.Equal(got, []string{r1.Interfaces[0].Address.Addr().String()}) {
		t.Errorf("r1's RLOCs %v", got)
	}
	xs, xd := p.Node("xs"), p.Node("xd")
	addr := func(n *NodePlan) string { return n.Interfaces[1].Address.Addr().String() } // the link to core
	if got := xs.Lispd.MapCache.ProbePeers; len(got) != 4 || got[0] != r1.Interfaces[0].Address.Addr().String() {
		t.Errorf("xs probes %v", got)
	}
	if got := r1.Lispd.MapCache.ProbePeers; !slices.Equal(got, []string{addr(xd), addr(xs)}) {
		t.Errorf("r1 probes %v, want xd and xs", got)
	}
	for _, n := range []*NodePlan{xs, xd, r1} {
		if n.Lispd.Metrics.Listen != "0.0.0.0:9342" || n.Lispd.MapCache.ProbeInterval.Duration.String() != "200ms" {
			t.Errorf("%s: metrics %q, probe-interval %v", n.Name, n.Lispd.Metrics.Listen, n.Lispd.MapCache.ProbeInterval)
		}
	}

	p = compileFile(t, "../../docs/scenarios/te-disjoint-topology.yaml")
	if ms := p.Node("ms").Lispd; !ms.TE.Disjoint {
		t.Errorf("te %+v", ms.TE)
	}
	for _, name := range []string{"xs", "r3"} {
		if got := p.Node(name).Lispd.Dataplane.PathID; got != "previous-hop" {
			t.Errorf("%s: path-id %q", name, got)
		}
	}
	if got := p.Node("r4").Lispd.MapCache.ProbePeers; len(got) != 1 {
		t.Errorf("r4 probes %v, want xd only", got)
	}
	if got := p.Node("r2").Lispd.MapCache.ProbePeers; len(got) != 1 || got[0] != p.Node("r3").Interfaces[0].Address.Addr().String() {
		t.Errorf("r2 probes %v, want r3 at its one address", got)
	}
}

func TestTEErrors(t *testing.T) {
	base := "name: x\nnodes: [{name: a, role: xtr, site: s}, {name: r, role: rtr}, {name: h, role: host}]\nsites: [{name: s}]\nlinks: [{ends: [h, a]}, {ends: [a, r]}]\n"
	for _, tc := range []struct{ te, want string }{
		{"te: {peers: [[a, h]]}", `te.peers[0][1]: "h" is not an xtr or rtr node`},
		{"te: {peers: [[a]]}", "te.peers[0]: want [from, to]"},
		{"te: {peers: [[a, a]]}", "te.peers[0]: a node does not probe itself"},
		{"te: {nodes: [{name: r, rlocs: [10.0.0.1]}]}", "te.nodes: the lab fills them in"},
		{"te: {}", "te: set, but the lab has no ms node"},
		{"te: {k: 99}", "te.k"},
	} {
		_, err := Parse([]byte(base + tc.te))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.te, err, tc.want)
		}
	}
}

// A site that binds subflows statefully registers without proxy
// replies: its ETR answers its Map-Requests and chooses each subflow's
// ELP.
func TestStatefulSiteAnswersItself(t *testing.T) {
	top, err := Parse([]byte(`
name: sf
nodes:
  - {name: h1, role: host}
  - {name: h2, role: host}
  - {name: xs, role: xtr, site: a}
  - {name: xd, role: xtr, site: b, mptcp-subflows: bind-stateful}
  - {name: ms, role: ms}
sites: [{name: a}, {name: b}]
links: [{ends: [h1, xs]}, {ends: [h2, xd]}, {ends: [xs, xd]}, {ends: [xs, ms]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(top, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, proxy := range map[string]bool{"xs": true, "xd": false} {
		x := p.Node(name).Lispd
		if x.XTR.MapServers[0].ProxyReply != proxy {
			t.Errorf("%s (mptcp-subflows %s): proxy-reply %v, want %v", name, x.Dataplane.MPTCPSubflows, x.XTR.MapServers[0].ProxyReply, proxy)
		}
	}
}
