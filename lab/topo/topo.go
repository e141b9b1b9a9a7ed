// Package topo is the lab's topology format: nodes in their roles (MPTCP
// hosts, xTRs, RTRs, map-servers, plain routers), the sites they form,
// the links between them with what the link emulator makes of them, and a
// timeline of events. A file is decoded strictly (an unknown field is an
// error) and validated with every problem named by its path
// (links[2].loss.bernoulli); Compile turns it into a Plan: namespaces,
// interfaces, addresses, routes and the generated configurations of
// lispd and `amptcp pm`, the same for the same file.
//
// The format is documented, with an example that a test loads, in
// docs/lab.md.
package topo

import (
	"fmt"
	"os"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/pm"
)

// Topology is a lab: what a topology file holds.
type Topology struct {
	// Name names the lab; its namespaces are amptcp-lab-<name>-<node>.
	Name string `yaml:"name"`
	// InstanceID of the overlay's EIDs, 0 (the default) for none.
	InstanceID uint32     `yaml:"instance-id"`
	Nodes      []Node     `yaml:"nodes"`
	Sites      []Site     `yaml:"sites"`
	Links      []Link     `yaml:"links"`
	Timeline   []Event    `yaml:"timeline"`
	Lispd      LispdFlags `yaml:"lispd"`
	// TE, when set, runs the te role beside the map-servers.
	TE    *TE   `yaml:"te"`
	Hosts Hosts `yaml:"hosts"`
}

// Hosts are settings of every host of the lab.
type Hosts struct {
	// TCPBuffers is the most a TCP socket's buffers grow to, each way
	// (the maximum of net.ipv4.tcp_rmem and tcp_wmem): "16MiB" for long
	// fat paths ([NorNet]'s hosts); the kernel's (6 and 4 MiB) when left
	// out.
	TCPBuffers string `yaml:"tcp-buffers"`
	// Scheduler is MPTCP's packet scheduler (net.mptcp.scheduler), one
	// of net.mptcp.available_schedulers; the kernel's default when left
	// out.
	Scheduler string `yaml:"mptcp-scheduler"`
}

// LispdFlags are settings of every lispd of the lab.
type LispdFlags struct {
	// ProbeInterval of the tunnel routers' RLOC probing (1s unless
	// given; 0s turns it off).
	ProbeInterval *config.Duration `yaml:"probe-interval"`
	// LogLevel of every lispd: debug, info (the default), warn, error.
	LogLevel string `yaml:"log-level"`
}

// Role is what a node is.
type Role string

// The roles.
const (
	// RoleHost is an MPTCP host; with a pm block it runs `amptcp pm`.
	RoleHost Role = "host"
	// RoleXTR is a site's tunnel router (lispd, xtr role).
	RoleXTR Role = "xtr"
	// RoleRTR is a re-encapsulating tunnel router on ELPs (lispd, rtr
	// role).
	RoleRTR Role = "rtr"
	// RoleMS is a map-server and map-resolver (lispd).
	RoleMS Role = "ms"
	// RoleDDT is a root node of the Delegated Database Tree (lispd,
	// ddt-node role): it refers each site's prefix to the ms nodes that
	// serve it, and the ms nodes resolve the others' sites through it.
	RoleDDT Role = "ddt-node"
	// RoleRouter forwards IP and runs nothing.
	RoleRouter Role = "router"
)

// Roles are all the roles, in the order they are documented.
var Roles = []Role{RoleHost, RoleXTR, RoleRTR, RoleMS, RoleDDT, RoleRouter}

// Node is a namespace of the lab.
type Node struct {
	Name string `yaml:"name"`
	Role Role   `yaml:"role"`
	// Site is the site of an xtr, or of a host (then it must be linked
	// to its site's xTR; left out, a host linked to an xTR is in its
	// site).
	Site string `yaml:"site"`
	// PM, on a host, runs `amptcp pm` with this configuration (docs/pm.md);
	// the lab fills in what the lab knows: the control socket, and for
	// the amptcp policy the map-resolver, the site's xTR and the instance
	// ID when they are left out.
	PM *pm.Config `yaml:"pm"`
	// EIDLinks and RLOCLinks name an xtr's links (by link name) that face
	// its site's hosts and the underlay. Left out: the links to hosts are
	// the EID side, the others, but those to a map-server, the RLOC side.
	EIDLinks  []string `yaml:"eid-links"`
	RLOCLinks []string `yaml:"rloc-links"`
	// PathSelection, SourceSelection and MPTCPSubflows are an xtr's
	// data-plane settings of the same names (docs/routers.md); lispd's
	// defaults if left out. With source-selection port-sum, the gateway
	// of each RLOC link is the neighbour on it.
	PathSelection   string `yaml:"path-selection"`
	SourceSelection string `yaml:"source-selection"`
	MPTCPSubflows   string `yaml:"mptcp-subflows"`
	// PathID is the data plane's path-id of an xtr or an rtr:
	// data-header or previous-hop.
	PathID string `yaml:"path-id"`
}

// Site is a LISP site: an EID prefix behind one xTR.
type Site struct {
	Name string `yaml:"name"`
	// EIDPrefix is assigned, 10.<n>.0.0/24 for the n-th site from 1,
	// when left out.
	EIDPrefix string `yaml:"eid-prefix"`
	// Key authenticates the site's registrations; left out, one is
	// derived from the lab's and the site's names (lab keys protect
	// nothing, they make plans reproducible).
	Key string `yaml:"key"`
	// ELPs, if given, are what the site registers instead of its plain
	// RLOCs: each a list of RTR node names, the path ends at the site's
	// RLOC nearest the last RTR.
	ELPs [][]string `yaml:"elps"`
	// MapServers are the ms nodes that serve the site: its xTR registers
	// with them and asks them. Every ms when left out; fewer need a
	// ddt-node, through which the other ms nodes find the site.
	MapServers []string `yaml:"map-servers"`
}

// Link joins two nodes. Without emulation settings it is a veth pair;
// with them, an emulated link (see docs/lab.md for what is wired today).
type Link struct {
	// Name names the link in eid-links, rloc-links and the timeline;
	// "<a>-<b>" when left out.
	Name string `yaml:"name"`
	// Ends are the two nodes' names.
	Ends []string `yaml:"ends"`
	// Addresses of the two ends, "10.0.1.1/30": assigned when left out,
	// from the site's EID prefix for a host's link to its xTR and from
	// 10.255.0.0/16 in /30s for the others.
	Addresses []string `yaml:"addresses"`
	// Rate ("8Mbit", "1Gbit"), Delay one way ("20ms"), Loss and Queue
	// ("64KB", "100 packets") of both directions, and the MTU (1500).
	Rate  string `yaml:"rate"`
	Delay string `yaml:"delay"`
	Loss  *Loss  `yaml:"loss"`
	Queue string `yaml:"queue"`
	MTU   int    `yaml:"mtu"`
}

// Loss is a loss model: one of the two fields.
type Loss struct {
	// Bernoulli loses each frame with this probability.
	Bernoulli *float64 `yaml:"bernoulli"`
	// GilbertElliott loses frames in bursts.
	GilbertElliott *GilbertElliott `yaml:"gilbert-elliott"`
}

// GilbertElliott is the two-state loss model with netem's parameters: p
// (good to bad), r (bad to good), h (a frame passes in the bad state;
// 0 by default) and k (a frame passes in the good state; 1 by default).
type GilbertElliott struct {
	P *float64 `yaml:"p"`
	R *float64 `yaml:"r"`
	H *float64 `yaml:"h"`
	K *float64 `yaml:"k"`
}

// Action is what an event does to its link.
type Action string

// The actions.
const (
	ActionDown Action = "down"
	ActionUp   Action = "up"
	// ActionSet changes rate, delay, loss or queue, of one direction or
	// both.
	ActionSet Action = "set"
)

// Event is a change of a link at a time of the run.
type Event struct {
	// At is the time from the start of the run, to the millisecond
	// ("5000ms", "12.5s").
	At   config.Duration `yaml:"at"`
	Link string          `yaml:"link"`
	// Action is down, up or set; set when left out.
	Action Action `yaml:"action"`
	// End, for down and up, is the end (a, the link's first, or b)
	// whose interface goes down or up: its node sees it, as a host sees
	// its port fail ([MPTCP-failures]). Left out, the link itself
	// fails: the emulator drops everything, and neither end notices.
	End string `yaml:"end"`
	// Direction, for set, is a-to-b or b-to-a (from the link's first end
	// to its second, or back); both when left out.
	Direction string `yaml:"direction"`
	Rate      string `yaml:"rate"`
	Delay     string `yaml:"delay"`
	Loss      *Loss  `yaml:"loss"`
	Queue     string `yaml:"queue"`
}

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse decodes a topology strictly, completes it (link names) and
// validates it; the error lists every problem with its path.
func Parse(data []byte) (*Topology, error) {
	var t Topology
	if err := config.Decode(data, &t); err != nil {
		return nil, err
	}
	t.Defaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Defaults fills in the names of links and the action of events.
func (t *Topology) Defaults() {
	for i := range t.Links {
		l := &t.Links[i]
		if l.Name == "" && len(l.Ends) == 2 {
			l.Name = l.Ends[0] + "-" + l.Ends[1]
		}
	}
	for i := range t.Timeline {
		if t.Timeline[i].Action == "" {
			t.Timeline[i].Action = ActionSet
		}
	}
}
