package topo

import (
	"errors"
	"fmt"
	"slices"

	"github.com/amptcp/amptcp/config"
)

// TE runs the te role beside the lab's map-servers (docs/te.md): its
// settings are the te section of lispd's configuration, but for the
// nodes, which the lab fills in (the RTRs; the te role learns the xTRs
// from their registrations). Every lispd of the lab then serves its
// metrics on MetricsPort, where the te role reads the RTT matrix, and
// the xTRs and RTRs probe their overlay peers.
type TE struct {
	config.TE `yaml:",inline"`
	// Peers are the overlay's links, [from, to] by node name: from probes
	// to at its address on a link they share, else at its first. Left
	// out, every xTR and RTR probes the xTRs and RTRs it has a link to.
	Peers [][]string `yaml:"peers"`
}

// MetricsPort is where the lab's lispds serve their metrics when the te
// role runs.
const MetricsPort = config.DefaultTEMetricsPort

func (t *Topology) validateTE(ck *checker, nodes map[string]*Node) {
	te := t.TE
	if te == nil {
		return
	}
	if len(te.Nodes) > 0 {
		ck.add("te.nodes", "the lab fills them in: its RTRs")
	}
	if len(te.Pairs) > 0 {
		ck.add("te.pairs", "the lab's te role runs beside the map-server: pairs come from Map-Requests")
	}
	// The rest is checked as lispd will check it.
	cp := te.TE
	cp.Nodes, cp.Pairs = nil, nil
	cfg := config.Config{Roles: []config.Role{config.RoleTE}, TE: &cp}
	cfg.Defaults()
	var errs config.Errors
	if errors.As(cfg.Validate(), &errs) {
		for _, e := range errs {
			ck.add(e.Path, "%s", e.Msg)
		}
	}
	for i, p := range te.Peers {
		path := fmt.Sprintf("te.peers[%d]", i)
		if len(p) != 2 {
			ck.add(path, "want [from, to], two node names")
			continue
		}
		for j, name := range p {
			if n := nodes[name]; n == nil || (n.Role != RoleXTR && n.Role != RoleRTR) {
				ck.add(fmt.Sprintf("%s[%d]", path, j), "%q is not an xtr or rtr node", name)
			}
		}
		if p[0] == p[1] {
			ck.add(path, "a node does not probe itself")
		}
	}
	if !slices.ContainsFunc(t.Nodes, func(n Node) bool { return n.Role == RoleMS }) {
		ck.add("te", "set, but the lab has no ms node to run it beside")
	}
}

// teConfig is the te role's configuration: the topology's, with the RTRs
// as its nodes, read at their first address.
func (c *compiler) teConfig() *config.TE {
	te := c.t.TE.TE
	te.MetricsPort = MetricsPort
	te.Nodes = nil
	for _, n := range c.plan.Nodes {
		if n.Role != RoleRTR || len(n.Interfaces) == 0 {
			continue
		}
		node := config.TENode{Name: n.Name, Role: "rtr"}
		for _, iface := range n.Interfaces {
			node.RLOCs = append(node.RLOCs, iface.Address.Addr().String())
		}
		te.Nodes = append(te.Nodes, node)
	}
	return &te
}

// peersOf are the addresses node probes for the te role.
func (c *compiler) peersOf(node string) []string {
	var pairs [][]string
	if c.t.TE.Peers != nil {
		pairs = c.t.TE.Peers
	} else {
		for _, iface := range c.plan.Node(node).Interfaces {
			if r := c.nodes[iface.Peer].Role; r == RoleXTR || r == RoleRTR {
				pairs = append(pairs, []string{node, iface.Peer})
			}
		}
	}
	var out []string
	for _, p := range pairs {
		if p[0] != node {
			continue
		}
		if a := c.addressFor(node, p[1]); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// addressFor is the address from probes to: on a link they share, else
// to's first address on its RLOC side.
func (c *compiler) addressFor(from, to string) string {
	peer := c.plan.Node(to)
	for _, iface := range peer.Interfaces {
		if iface.Peer == from {
			return iface.Address.Addr().String()
		}
	}
	for _, iface := range peer.Interfaces {
		if !iface.EID && c.nodes[iface.Peer].Role != RoleMS {
			return iface.Address.Addr().String()
		}
	}
	return ""
}
