package topo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/pm"
)

// NamespacePrefix starts the names of every lab's namespaces; a lab's own
// are NamespacePrefix + "<lab>-<node>".
const NamespacePrefix = "amptcp-lab-"

// Plan is what a lab is made of, ready to build: every name, address,
// route and configuration, computed from the topology alone.
type Plan struct {
	Name string
	// Prefix starts the names of the lab's namespaces.
	Prefix string
	// Dir holds the generated configurations, sockets and logs.
	Dir      string
	Nodes    []NodePlan
	Links    []LinkPlan
	Sites    []SitePlan
	Timeline []Event // in the order of their times
	// Hosts are the settings of every host.
	Hosts Hosts
}

// NodePlan is a namespace and what runs in it.
type NodePlan struct {
	Name      string
	Role      Role
	Namespace string
	Site      string // "" outside a site
	// Interfaces in the order of the node's links: eth0, eth1, ...
	Interfaces []Interface
	Routes     []Route
	// SourceRoutes send what a host with several links sends from each
	// of its addresses by that address's link.
	SourceRoutes []SourceRoute
	// Forwarding: routers forward IP, hosts do not.
	Forwarding bool
	// Lispd is the configuration of the node's lispd, nil when it runs
	// none; LispdSocket its control socket; LispdInstance the instance
	// of its systemd unit (deploy/), which names its configuration file.
	Lispd         *config.Config
	LispdSocket   string
	LispdInstance string
	// PM is the configuration of the host's `amptcp pm`, nil when it runs
	// none; PMSocket its control socket.
	PM       *pm.Config
	PMSocket string
}

// Interface is a node's end of a link.
type Interface struct {
	Name    string
	Link    string
	Peer    string // the node at the other end
	Address netip.Prefix
	// EID marks an xtr's interfaces toward its site's hosts.
	EID bool
}

// Route is a route of a node: to Dst (the default route when Dst is not
// valid) through the gateway Via, a neighbour on the interface Dev.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
	Dev string
}

func (r Route) String() string {
	dst := "default"
	if r.Dst.IsValid() {
		dst = r.Dst.String()
	}
	return fmt.Sprintf("%s via %s dev %s", dst, r.Via, r.Dev)
}

// SourceRoute is a rule (from From, look up Table) and a default route
// in Table through the neighbour Via on Dev: a multi-homed host sends
// what it sends from an address by that address's link, as [NorNet]'s
// hosts do with one address per ISP.
type SourceRoute struct {
	From  netip.Addr
	Table int
	Via   netip.Addr
	Dev   string
}

// Sysctls are what a host's settings make of its namespace's sysctls.
func (h Hosts) Sysctls() [][2]string {
	var out [][2]string
	if n, err := ParseSize(h.TCPBuffers); err == nil {
		// The kernel's minimum and initial sizes, a larger maximum.
		out = append(out, [2]string{"net.ipv4.tcp_rmem", fmt.Sprintf("4096 131072 %d", n)},
			[2]string{"net.ipv4.tcp_wmem", fmt.Sprintf("4096 16384 %d", n)})
	}
	if h.Scheduler != "" {
		out = append(out, [2]string{"net.mptcp.scheduler", h.Scheduler})
	}
	return out
}

// sourceTable is the routing table of a host's first link's source
// route; the n-th link's is sourceTable + n.
const sourceTable = 100

// LinkPlan is a link between two namespaces.
type LinkPlan struct {
	Name string
	A, B End
	MTU  int
	// Emulated links have Params in both directions (the same, until
	// the timeline changes one).
	Emulated bool
	Params   linkemu.Params
}

// End is one end of a link.
type End struct {
	Node, Namespace, Interface string
	Address                    netip.Prefix
}

// SitePlan is a site with what was assigned to it.
type SitePlan struct {
	Name      string
	EIDPrefix netip.Prefix
	Key       string
	XTR       string
	// Locators are what its xTR registers: its RLOCs, or its ELPs.
	Locators []config.LocatorConfig
}

// Node returns the node's plan, or nil.
func (p *Plan) Node(name string) *NodePlan {
	for i := range p.Nodes {
		if p.Nodes[i].Name == name {
			return &p.Nodes[i]
		}
	}
	return nil
}

// Site returns the site's plan, or nil.
func (p *Plan) Site(name string) *SitePlan {
	for i := range p.Sites {
		if p.Sites[i].Name == name {
			return &p.Sites[i]
		}
	}
	return nil
}

// Interface returns the node's end of the named link, or nil.
func (n *NodePlan) Interface(link string) *Interface {
	for i := range n.Interfaces {
		if n.Interfaces[i].Link == link {
			return &n.Interfaces[i]
		}
	}
	return nil
}

// EtcDir is the node's /etc/amptcp: where the command lines of the
// deploy/ units, which the lab runs, find its configuration files.
func (p *Plan) EtcDir(node string) string { return filepath.Join(p.Dir, node, "etc", "amptcp") }

// LogPath is the log of a node's daemon ("lispd" or "pm").
func (p *Plan) LogPath(node, daemon string) string {
	return filepath.Join(p.Dir, node+"."+daemon+".log")
}

// compiler holds what Compile works out along the way.
type compiler struct {
	t     *Topology
	plan  *Plan
	nodes map[string]*Node
	sites map[string]*SitePlan
	// eid marks the links on an xtr's EID side.
	eid map[string]bool
}

// Compile turns a valid topology into the plan of a lab whose files live
// in dir. The same topology and dir give the same plan.
func Compile(t *Topology, dir string) (*Plan, error) {
	c := &compiler{t: t, nodes: map[string]*Node{}, sites: map[string]*SitePlan{}, eid: map[string]bool{},
		plan: &Plan{Name: t.Name, Prefix: NamespacePrefix + t.Name + "-", Dir: dir}}
	for i := range t.Nodes {
		c.nodes[t.Nodes[i].Name] = &t.Nodes[i]
	}
	c.siteOfHosts()
	if err := c.assignSites(); err != nil {
		return nil, err
	}
	c.markEIDLinks()
	if err := c.assignAddresses(); err != nil {
		return nil, err
	}
	c.routes()
	c.locators()
	if err := c.configs(); err != nil {
		return nil, err
	}
	c.plan.Hosts = t.Hosts
	c.plan.Timeline = slices.Clone(t.Timeline)
	slices.SortStableFunc(c.plan.Timeline, func(a, b Event) int { return int(a.At.Duration - b.At.Duration) })
	return c.plan, nil
}

// siteOfHosts puts each host whose first link goes to an xtr in that
// xtr's site, unless the file says otherwise.
func (c *compiler) siteOfHosts() {
	for _, n := range c.t.Nodes {
		site := n.Site
		if n.Role == RoleHost && site == "" {
			if l := c.firstLink(n.Name); l != nil {
				if peer := c.nodes[l.other(n.Name)]; peer.Role == RoleXTR {
					site = peer.Site
				}
			}
		}
		c.plan.Nodes = append(c.plan.Nodes, NodePlan{Name: n.Name, Role: n.Role, Site: site,
			Namespace: c.plan.Prefix + n.Name, Forwarding: n.Role != RoleHost})
	}
}

func (c *compiler) firstLink(node string) *Link {
	for i := range c.t.Links {
		if slices.Contains(c.t.Links[i].Ends, node) {
			return &c.t.Links[i]
		}
	}
	return nil
}

// assignSites gives each site its EID prefix, key and xTR.
func (c *compiler) assignSites() error {
	used := map[netip.Prefix]bool{}
	for _, s := range c.t.Sites {
		if s.EIDPrefix != "" {
			used[netip.MustParsePrefix(s.EIDPrefix)] = true
		}
	}
	next := 1
	for _, s := range c.t.Sites {
		sp := SitePlan{Name: s.Name, Key: s.Key}
		if s.EIDPrefix != "" {
			sp.EIDPrefix = netip.MustParsePrefix(s.EIDPrefix)
		} else {
			for ; ; next++ {
				if next > 254 {
					return fmt.Errorf("site %s: no 10.<n>.0.0/24 left for its EID prefix: give eid-prefix", s.Name)
				}
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(next), 0, 0}), 24)
				if !overlapsAny(p, used) {
					sp.EIDPrefix = p
					used[p] = true
					next++
					break
				}
			}
		}
		if sp.Key == "" {
			sp.Key = labKey(c.t.Name, s.Name)
		}
		for _, n := range c.t.Nodes {
			if n.Role == RoleXTR && n.Site == s.Name {
				sp.XTR = n.Name
			}
		}
		c.plan.Sites = append(c.plan.Sites, sp)
	}
	for i := range c.plan.Sites {
		c.sites[c.plan.Sites[i].Name] = &c.plan.Sites[i]
	}
	return nil
}

func overlapsAny(p netip.Prefix, set map[netip.Prefix]bool) bool {
	for q := range set {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

// labKey derives a site's key from public names: reproducible, and no
// secret (see Site.Key).
func labKey(lab, site string) string {
	m := hmac.New(sha256.New, []byte("amptcp lab site key"))
	m.Write([]byte(lab + "\x00" + site))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// markEIDLinks finds the links on the EID side of each xtr.
func (c *compiler) markEIDLinks() {
	for _, n := range c.t.Nodes {
		if n.Role != RoleXTR {
			continue
		}
		if n.EIDLinks != nil {
			for _, name := range n.EIDLinks {
				c.eid[name] = true
			}
			continue
		}
		for _, l := range c.t.Links {
			if !slices.Contains(l.Ends, n.Name) {
				continue
			}
			peer := c.plan.Node(l.other(n.Name))
			if peer.Role == RoleHost && peer.Site == n.Site {
				c.eid[l.Name] = true
			}
		}
	}
}

// xtrOfEIDLink is the xtr whose EID side l is, or nil.
func (c *compiler) xtrOfEIDLink(l *Link) *Node {
	if !c.eid[l.Name] {
		return nil
	}
	for _, e := range l.Ends {
		if n := c.nodes[e]; n.Role == RoleXTR {
			return n
		}
	}
	return nil
}

// underlayPool is where links outside sites get their /30s.
var underlayPool = netip.MustParsePrefix("10.255.0.0/16")

// assignAddresses gives every link its two addresses and every node its
// interfaces.
func (c *compiler) assignAddresses() error {
	used := map[netip.Prefix]bool{}
	for _, l := range c.t.Links {
		if len(l.Addresses) == 2 {
			used[netip.MustParsePrefix(l.Addresses[0]).Masked()] = true
		}
	}
	eidNext := map[string]*int{} // site -> its next /30
	poolNext := 0
	ifaces := map[string]int{} // node -> its next interface number
	for _, l := range c.t.Links {
		var a, b netip.Prefix
		switch xtr := c.xtrOfEIDLink(&l); {
		case len(l.Addresses) == 2:
			a, b = netip.MustParsePrefix(l.Addresses[0]), netip.MustParsePrefix(l.Addresses[1])
		case xtr != nil:
			site := c.sites[xtr.Site]
			if eidNext[xtr.Site] == nil {
				eidNext[xtr.Site] = new(int)
			}
			sub, err := nextFree(site.EIDPrefix, eidNext[xtr.Site], used)
			if err != nil {
				return fmt.Errorf("link %s: site %s's EID prefix %s: %w", l.Name, site.Name, site.EIDPrefix, err)
			}
			// The xTR takes the first address: hosts are the second.
			a, b = hostAddr(sub, 1), hostAddr(sub, 2)
			if l.Ends[0] != xtr.Name {
				a, b = b, a
			}
		default:
			sub, err := nextFree(underlayPool, &poolNext, used)
			if err != nil {
				return fmt.Errorf("link %s: %s: %w", l.Name, underlayPool, err)
			}
			a, b = hostAddr(sub, 1), hostAddr(sub, 2)
		}
		lp := LinkPlan{Name: l.Name, MTU: l.mtu()}
		lp.Params, lp.Emulated = l.Params()
		for i, addr := range []netip.Prefix{a, b} {
			node := c.plan.Node(l.Ends[i])
			iface := Interface{Name: fmt.Sprintf("eth%d", ifaces[node.Name]), Link: l.Name,
				Peer: l.Ends[1-i], Address: addr, EID: c.eid[l.Name] && node.Role == RoleXTR}
			ifaces[node.Name]++
			node.Interfaces = append(node.Interfaces, iface)
			end := End{Node: node.Name, Namespace: node.Namespace, Interface: iface.Name, Address: addr}
			if i == 0 {
				lp.A = end
			} else {
				lp.B = end
			}
		}
		c.plan.Links = append(c.plan.Links, lp)
	}
	return nil
}

// nextFree returns the next /30 of pool, from the index *next on, that
// overlaps none of used, and marks it used.
func nextFree(pool netip.Prefix, next *int, used map[netip.Prefix]bool) (netip.Prefix, error) {
	base := pool.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	count := 1 << (30 - pool.Bits())
	for ; *next < count; *next++ {
		v := start + uint32(*next)*4
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 30)
		if !overlapsAny(p, used) {
			used[p] = true
			*next++
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no /30 left")
}

// hostAddr is the i-th address of a subnet, with the subnet's length.
func hostAddr(sub netip.Prefix, i int) netip.Prefix {
	a := sub.Addr()
	for range i {
		a = a.Next()
	}
	return netip.PrefixFrom(a, sub.Bits())
}
