package topo

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/pm"
)

// The settings of the generated lispd configurations.
const (
	// DefaultProbeInterval is the xTRs' RLOC-probe interval in the lab,
	// short so that failures show within seconds.
	DefaultProbeInterval = time.Second
	// recordTTL is the TTL of the sites' registrations.
	recordTTL = 5 * time.Minute
	// keyID is the ID of every site's key.
	keyID = 1
)

// rlocLinks are the links of an xtr on its RLOC side: the ones the file
// names, or those that are neither EID links nor links to a map-server.
func (c *compiler) rlocLinks(xtr *NodePlan) []Interface {
	n := c.nodes[xtr.Name]
	var out []Interface
	for _, iface := range xtr.Interfaces {
		switch {
		case n.RLOCLinks != nil:
			if slices.Contains(n.RLOCLinks, iface.Link) {
				out = append(out, iface)
			}
		case !iface.EID && c.nodes[iface.Peer].Role != RoleMS && c.nodes[iface.Peer].Role != RoleDDT:
			out = append(out, iface)
		}
	}
	return out
}

// locators works out what each site's xTR registers: an ELP per path the
// site lists, or else each of its RLOCs, all of priority 1 and the same
// weight.
func (c *compiler) locators() {
	for i := range c.plan.Sites {
		s := &c.plan.Sites[i]
		xtr := c.plan.Node(s.XTR)
		rlocs := c.rlocLinks(xtr)
		var paths [][]config.ELPHop
		for _, elp := range c.siteOf(s.Name).ELPs {
			paths = append(paths, c.elpHops(elp, xtr, rlocs))
		}
		n := max(len(paths), len(rlocs))
		weight := uint8(100 / max(n, 1))
		if len(paths) > 0 {
			for _, hops := range paths {
				s.Locators = append(s.Locators, config.LocatorConfig{ELP: hops, Priority: 1, Weight: weight})
			}
			continue
		}
		for _, r := range rlocs {
			s.Locators = append(s.Locators, config.LocatorConfig{Address: r.Address.Addr().String(), Priority: 1, Weight: weight})
		}
	}
}

func (c *compiler) siteOf(name string) *Site {
	for i := range c.t.Sites {
		if c.t.Sites[i].Name == name {
			return &c.t.Sites[i]
		}
	}
	return nil
}

// elpHops turns a list of RTRs into an ELP's addresses. An RTR's hop is
// its address on the link it shares with the previous RTR; the first
// RTR's (whose previous hop is any ITR) is its address on its first link
// that does not go to the next hop. The last hop is the site's RLOC on a
// link to the last RTR, or its first RLOC.
func (c *compiler) elpHops(rtrs []string, xtr *NodePlan, rlocs []Interface) []config.ELPHop {
	var hops []config.ELPHop
	for k, name := range rtrs {
		r := c.plan.Node(name)
		next := xtr.Name
		if k+1 < len(rtrs) {
			next = rtrs[k+1]
		}
		var addr string
		for _, iface := range r.Interfaces {
			if (k > 0 && iface.Peer == rtrs[k-1]) || (k == 0 && iface.Peer != next) {
				addr = iface.Address.Addr().String()
				break
			}
		}
		if addr == "" && len(r.Interfaces) > 0 {
			addr = r.Interfaces[0].Address.Addr().String()
		}
		hops = append(hops, config.ELPHop{Address: addr})
	}
	last := rtrs[len(rtrs)-1]
	for _, r := range rlocs {
		if r.Peer == last {
			return append(hops, config.ELPHop{Address: r.Address.Addr().String()})
		}
	}
	if len(rlocs) > 0 {
		return append(hops, config.ELPHop{Address: rlocs[0].Address.Addr().String()})
	}
	return hops
}

// addressesOf are the addresses of nodes of a role, by their first link.
func (c *compiler) addressesOf(role Role) []string {
	var out []string
	for _, n := range c.plan.Nodes {
		if n.Role == role && len(n.Interfaces) > 0 {
			out = append(out, n.Interfaces[0].Address.Addr().String())
		}
	}
	return out
}

// serves reports whether ms node ms serves site s: it is one of the
// site's map-servers, or the site names none.
func (c *compiler) serves(ms string, s *Site) bool {
	return len(s.MapServers) == 0 || slices.Contains(s.MapServers, ms)
}

// mapServersOf are the addresses of the ms nodes that serve a site: its
// xTR registers with them and asks them.
func (c *compiler) mapServersOf(site string) []string {
	var out []string
	for _, n := range c.plan.Nodes {
		if n.Role == RoleMS && len(n.Interfaces) > 0 && c.serves(n.Name, c.siteOf(site)) {
			out = append(out, n.Interfaces[0].Address.Addr().String())
		}
	}
	return out
}

// The lispd instance of each role: which configuration file of the unit
// it runs (deploy/: lispd@ms.service reads /etc/amptcp/ms.yaml).
var lispdInstances = map[Role]string{RoleMS: "ms", RoleDDT: "ddt", RoleXTR: "xtr", RoleRTR: "rtr"}

// allGPE sends LISP-GPE to every RLOC: the lab's tunnel routers are all
// lispd's (docs/routers.md, "LISP-GPE and GRO").
var allGPE = config.LISPGPE{Peers: []string{"0.0.0.0/0", "::/0"}}

// configs generates the configuration of every lispd and `amptcp pm`,
// completed with their defaults and validated as they will be.
func (c *compiler) configs() error {
	mrs, roots := c.addressesOf(RoleMS), c.addressesOf(RoleDDT)
	probe := config.Duration{Duration: DefaultProbeInterval}
	if c.t.Lispd.ProbeInterval != nil {
		probe = *c.t.Lispd.ProbeInterval
	}
	logLevel := c.t.Lispd.LogLevel
	for i := range c.plan.Nodes {
		n := &c.plan.Nodes[i]
		var cfg *config.Config
		switch n.Role {
		case RoleMS:
			cfg = c.msConfig(n, roots)
		case RoleDDT:
			cfg = c.ddtConfig()
		case RoleXTR:
			s := c.sites[n.Site]
			node := c.nodes[n.Name]
			dp := &config.Dataplane{InstanceID: c.t.InstanceID, PathSelection: node.PathSelection,
				SourceSelection: node.SourceSelection, MPTCPSubflows: node.MPTCPSubflows, PathID: node.PathID,
				LISPGPE: allGPE}
			for _, iface := range n.Interfaces {
				if iface.EID {
					dp.EIDInterfaces = append(dp.EIDInterfaces, iface.Name)
				}
			}
			for _, iface := range c.rlocLinks(n) {
				dp.RLOCInterfaces = append(dp.RLOCInterfaces, iface.Name)
				if node.SourceSelection == "port-sum" {
					if dp.RLOCGateways == nil {
						dp.RLOCGateways = map[string]string{}
					}
					dp.RLOCGateways[iface.Name] = c.plan.Node(iface.Peer).Interface(iface.Link).Address.Addr().String()
				}
			}
			x := &config.XTR{DatabaseMappings: []config.DatabaseMapping{{EIDPrefix: s.EIDPrefix.String(),
				TTL: config.Duration{Duration: recordTTL}, Locators: s.Locators}}}
			siteMS := c.mapServersOf(n.Site)
			// A site that binds statefully answers its Map-Requests itself
			// (its ETR chooses each subflow's ELP); the others let the
			// map-servers answer.
			proxy := node.MPTCPSubflows != "bind-stateful"
			for _, ms := range siteMS {
				x.MapServers = append(x.MapServers, config.MapServerRef{Address: ms, KeyID: keyID, Secret: s.Key, ProxyReply: proxy})
			}
			cfg = &config.Config{Roles: []config.Role{config.RoleXTR}, Dataplane: dp, XTR: x,
				MapCache: &config.MapCache{MapResolvers: siteMS, ProbeInterval: &probe}}
		case RoleRTR:
			dp := &config.Dataplane{PathID: c.nodes[n.Name].PathID, LISPGPE: allGPE}
			for _, iface := range n.Interfaces {
				dp.RLOCInterfaces = append(dp.RLOCInterfaces, iface.Name)
			}
			// RTRs probe nothing: the xTRs probe every hop of their
			// ELPs (docs/routers.md).
			cfg = &config.Config{Roles: []config.Role{config.RoleRTR}, Dataplane: dp,
				MapCache: &config.MapCache{MapResolvers: mrs, ProbeInterval: &config.Duration{}}}
			if c.t.TE != nil && len(c.peersOf(n.Name)) > 0 {
				cfg.MapCache.ProbeInterval = &probe // for the te role's RTT matrix
			}
		case RoleHost:
			if err := c.pmConfig(n, mrs); err != nil {
				return err
			}
		}
		if cfg == nil {
			continue
		}
		n.LispdInstance = lispdInstances[n.Role]
		if c.t.TE != nil && (n.Role == RoleXTR || n.Role == RoleRTR) {
			cfg.Metrics.Listen = fmt.Sprintf("0.0.0.0:%d", MetricsPort)
			if cfg.MapCache.ProbeInterval.Duration > 0 {
				cfg.MapCache.ProbePeers = c.peersOf(n.Name)
			}
		}
		n.LispdSocket = filepath.Join(c.plan.Dir, n.Name+".lispd.sock")
		cfg.Listen = []string{"0.0.0.0"}
		cfg.Control.Socket = n.LispdSocket
		cfg.Log.Level = logLevel
		cfg.Defaults()
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("node %s: the generated lispd configuration is invalid:\n%w", n.Name, err)
		}
		n.Lispd = cfg
	}
	return nil
}

// msConfig is an ms node's: the map-server of the sites it serves, and
// their map-resolver, which resolves the other sites through the
// ddt-nodes (roots) when the lab has some.
func (c *compiler) msConfig(n *NodePlan, roots []string) *config.Config {
	cfg := &config.Config{Roles: []config.Role{config.RoleMapServer, config.RoleMapResolver},
		MapServer: &config.MapServer{}}
	if c.t.TE != nil {
		cfg.Roles = append(cfg.Roles, config.RoleTE)
		cfg.TE = c.teConfig()
	}
	for _, s := range c.plan.Sites {
		if !c.serves(n.Name, c.siteOf(s.Name)) {
			continue
		}
		cfg.MapServer.Sites = append(cfg.MapServer.Sites, config.Site{Name: s.Name,
			Keys:        []config.Key{{ID: keyID, Secret: s.Key}},
			EIDPrefixes: []config.EIDPrefix{{Prefix: s.EIDPrefix.String(), InstanceID: c.t.InstanceID}}})
	}
	if len(roots) > 0 {
		ddt := &config.ResolverDDT{}
		for _, r := range roots {
			ddt.Root = append(ddt.Root, config.Referral{Address: r})
		}
		cfg.MapResolver = &config.MapResolver{DDT: ddt}
	}
	return cfg
}

// ddtConfig is a ddt-node's: authoritative for the overlay's whole IPv4
// space, it refers each site's prefix to the ms nodes that serve it.
func (c *compiler) ddtConfig() *config.Config {
	node := &config.DDTNode{AuthoritativePrefixes: []config.ExtendedPrefix{{Prefix: "0.0.0.0/0", InstanceID: c.t.InstanceID}}}
	for _, s := range c.plan.Sites {
		d := config.Delegation{Prefix: s.EIDPrefix.String(), InstanceID: c.t.InstanceID, Type: config.DelegateMapServer}
		for _, ms := range c.mapServersOf(s.Name) {
			d.Referrals = append(d.Referrals, config.Referral{Address: ms})
		}
		node.Delegations = append(node.Delegations, d)
	}
	return &config.Config{Roles: []config.Role{config.RoleDDTNode}, DDTNode: node}
}

// pmConfig completes a host's pm block with what the lab knows.
func (c *compiler) pmConfig(n *NodePlan, mrs []string) error {
	src := c.nodes[n.Name].PM
	if src == nil {
		return nil
	}
	cfg := *src
	n.PMSocket = filepath.Join(c.plan.Dir, n.Name+".pm.sock")
	cfg.Control.Socket = n.PMSocket
	// The binder policy asks the mapping system for its site's
	// gateways when the lab has one; without, it knows none.
	if cfg.Policy == pm.PolicyAMPTCP || cfg.Policy == pm.PolicyBinder && len(mrs) > 0 || cfg.AMPTCP != nil {
		a := pm.AMPTCP{}
		if cfg.AMPTCP != nil {
			a = *cfg.AMPTCP
		}
		if ms := c.mapServersOf(n.Site); a.MapResolver == "" && len(ms) > 0 {
			a.MapResolver = ms[0] // one that serves the host's site
		} else if a.MapResolver == "" && len(mrs) > 0 {
			a.MapResolver = mrs[0]
		}
		if s := c.sites[n.Site]; a.XTR == "" && s != nil {
			if xtr := c.plan.Node(s.XTR).Interface(n.Interfaces[0].Link); xtr != nil {
				a.XTR = xtr.Address.Addr().String()
			}
		}
		if a.InstanceID == nil && c.t.InstanceID != 0 {
			iid := c.t.InstanceID
			a.InstanceID = &iid
		}
		cfg.AMPTCP = &a
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("node %s: the generated pm configuration is invalid:\n%w", n.Name, err)
	}
	n.PM = &cfg
	return nil
}

// LispdYAML is the node's lispd configuration file.
func (n *NodePlan) LispdYAML() ([]byte, error) {
	if n.Lispd == nil {
		return nil, fmt.Errorf("node %s runs no lispd", n.Name)
	}
	return marshal(n.Name+" (lispd, "+string(n.Role)+")", n.Lispd)
}

// PMYAML is the host's `amptcp pm` configuration file.
func (n *NodePlan) PMYAML() ([]byte, error) {
	if n.PM == nil {
		return nil, fmt.Errorf("node %s runs no amptcp pm", n.Name)
	}
	return marshal(n.Name+" (amptcp pm)", n.PM)
}

func marshal(what string, v any) ([]byte, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Generated by amptcp lab for "+what+".\n"), b...), nil
}
