package topo

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/pm"
)

// checker collects the problems of a topology.
type checker struct{ errs config.Errors }

func (ck *checker) add(path, format string, args ...any) {
	ck.errs = append(ck.errs, config.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// nameRE is what names of labs, nodes, sites and links look like: they
// end up in namespace and file names.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// schedulerRE is what an MPTCP scheduler's name looks like
// (MPTCP_SCHED_NAME_MAX is 16 with its NUL).
var schedulerRE = regexp.MustCompile(`^[a-z0-9_]{1,15}$`)

// maxNameLen bounds names, so that namespace names stay readable.
const maxNameLen = 32

func (ck *checker) name(path, s string) bool {
	switch {
	case s == "":
		ck.add(path, "missing")
	case len(s) > maxNameLen || !nameRE.MatchString(s):
		ck.add(path, "%q is not a name of lowercase letters, digits and dashes, at most %d long", s, maxNameLen)
	default:
		return true
	}
	return false
}

// register checks a name and adds v under it to seen, unless another
// thing of its kind has it.
func register[T any](ck *checker, path, kind, name string, seen map[string]*T, v *T) {
	if !ck.name(path, name) {
		return
	}
	if seen[name] != nil {
		ck.add(path, "%q is the name of another %s", name, kind)
		return
	}
	seen[name] = v
}

// Validate returns every problem of the topology at once, as
// config.Errors.
func (t *Topology) Validate() error {
	var ck checker
	ck.name("name", t.Name)
	if t.InstanceID > 0xffffff {
		ck.add("instance-id", "%d exceeds the 24 bits of an instance ID", t.InstanceID)
	}
	if t.Lispd.ProbeInterval != nil && t.Lispd.ProbeInterval.Duration < 0 {
		ck.add("lispd.probe-interval", "must not be negative")
	}
	if l := t.Lispd.LogLevel; l != "" && !slices.Contains([]string{"debug", "info", "warn", "error"}, l) {
		ck.add("lispd.log-level", "%q is not one of debug, info, warn, error", l)
	}
	nodes := t.validateNodes(&ck)
	sites := t.validateSites(&ck, nodes)
	links := t.validateLinks(&ck, nodes)
	t.validateRoles(&ck, nodes, sites, links)
	t.validateTimeline(&ck, links)
	t.validateTE(&ck, nodes)
	if b := t.Hosts.TCPBuffers; b != "" {
		if n, err := ParseSize(b); err != nil {
			ck.add("hosts.tcp-buffers", "%v", err)
		} else if n < 64<<10 || n > 1<<30 {
			ck.add("hosts.tcp-buffers", "%s is not between 64KiB and 1GiB", b)
		}
	}
	if s := t.Hosts.Scheduler; s != "" && !schedulerRE.MatchString(s) {
		ck.add("hosts.mptcp-scheduler", "%q is not a scheduler's name", s)
	}
	if len(ck.errs) > 0 {
		return ck.errs
	}
	return nil
}

func (t *Topology) validateNodes(ck *checker) map[string]*Node {
	nodes := map[string]*Node{}
	if len(t.Nodes) == 0 {
		ck.add("nodes", "missing: a lab has at least one node")
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		path := fmt.Sprintf("nodes[%d]", i)
		register(ck, path+".name", "node", n.Name, nodes, n)
		if !slices.Contains(Roles, n.Role) {
			ck.add(path+".role", "%q is not one of %v", n.Role, Roles)
		}
		if n.Site != "" && n.Role != RoleHost && n.Role != RoleXTR {
			ck.add(path+".site", "only hosts and xtrs are in a site")
		}
		if n.Role == RoleXTR && n.Site == "" {
			ck.add(path+".site", "missing: an xtr is the tunnel router of a site")
		}
		if n.PM != nil {
			if n.Role != RoleHost {
				ck.add(path+".pm", "only hosts run amptcp pm")
			} else if errs := pmProblems(n.PM); len(errs) > 0 {
				for _, e := range errs {
					ck.add(path+".pm."+e.Path, "%s", e.Msg)
				}
			}
		}
		if n.Role != RoleXTR {
			for field, set := range map[string]bool{"eid-links": n.EIDLinks != nil, "rloc-links": n.RLOCLinks != nil,
				"path-selection": n.PathSelection != "", "source-selection": n.SourceSelection != "",
				"mptcp-subflows": n.MPTCPSubflows != ""} {
				if set {
					ck.add(path+"."+field, "only an xtr has it")
				}
			}
		}
		if n.PathID != "" && n.Role != RoleXTR && n.Role != RoleRTR {
			ck.add(path+".path-id", "only an xtr or an rtr has it")
		}
	}
	return nodes
}

// pmProblems validates a copy of a host's pm block the way `amptcp pm`
// will, after the lab has filled in what it knows (a placeholder
// map-resolver stands for the lab's).
func pmProblems(c *pm.Config) config.Errors {
	cp := *c
	if cp.AMPTCP != nil {
		a := *cp.AMPTCP
		if a.MapResolver == "" {
			a.MapResolver = "192.0.2.1"
		}
		cp.AMPTCP = &a
	} else if cp.Policy == pm.PolicyAMPTCP {
		cp.AMPTCP = &pm.AMPTCP{MapResolver: "192.0.2.1"}
	}
	cp.Defaults()
	var errs config.Errors
	if err := cp.Validate(); err != nil {
		errors.As(err, &errs)
	}
	return errs
}

func (t *Topology) validateSites(ck *checker, nodes map[string]*Node) map[string]*Site {
	sites := map[string]*Site{}
	prefixes := map[netip.Prefix]string{}
	for i := range t.Sites {
		s := &t.Sites[i]
		path := fmt.Sprintf("sites[%d]", i)
		register(ck, path+".name", "site", s.Name, sites, s)
		if s.EIDPrefix != "" {
			p, err := (config.EIDPrefix{Prefix: s.EIDPrefix}).Parse()
			switch {
			case err != nil:
				ck.add(path+".eid-prefix", "%v", err)
			case !p.Addr().Is4() || p.Bits() > 29:
				ck.add(path+".eid-prefix", "%s is not an IPv4 prefix of /29 or larger (room for a host link)", p)
			case prefixes[p] != "":
				ck.add(path+".eid-prefix", "%s is already %s", p, prefixes[p])
			default:
				prefixes[p] = path
			}
		}
		for j, elp := range s.ELPs {
			epath := fmt.Sprintf("%s.elps[%d]", path, j)
			if len(elp) == 0 {
				ck.add(epath, "empty: an ELP goes through at least one RTR")
			}
			if len(elp)+1 > config.MaxHops {
				ck.add(epath, "%d RTRs: an ELP has at most %d hops, the site's RLOC included", len(elp), config.MaxHops)
			}
			for k, r := range elp {
				if n := nodes[r]; n == nil || n.Role != RoleRTR {
					ck.add(fmt.Sprintf("%s[%d]", epath, k), "%q is not an rtr node", r)
				}
			}
		}
		if len(s.ELPs) > config.MaxPaths {
			ck.add(path+".elps", "%d ELPs: a mapping has at most %d locators", len(s.ELPs), config.MaxPaths)
		}
		for j, ms := range s.MapServers {
			if n := nodes[ms]; n == nil || n.Role != RoleMS {
				ck.add(fmt.Sprintf("%s.map-servers[%d]", path, j), "%q is not an ms node", ms)
			}
		}
	}
	for i, n := range t.Nodes {
		if n.Site != "" && sites[n.Site] == nil {
			ck.add(fmt.Sprintf("nodes[%d].site", i), "%q is not a site", n.Site)
		}
	}
	return sites
}

func (t *Topology) validateLinks(ck *checker, nodes map[string]*Node) map[string]*Link {
	links := map[string]*Link{}
	for i := range t.Links {
		l := &t.Links[i]
		path := fmt.Sprintf("links[%d]", i)
		if len(l.Ends) != 2 {
			ck.add(path+".ends", "a link has two ends, node names")
		} else {
			for j, e := range l.Ends {
				if nodes[e] == nil {
					ck.add(fmt.Sprintf("%s.ends[%d]", path, j), "%q is not a node", e)
				}
			}
			if l.Ends[0] == l.Ends[1] {
				ck.add(path+".ends", "both ends are %s", l.Ends[0])
			}
		}
		register(ck, path+".name", "link", l.Name, links, l)
		switch len(l.Addresses) {
		case 0:
		case 2:
			var ps [2]netip.Prefix
			for j, a := range l.Addresses {
				p, err := netip.ParsePrefix(a)
				if err != nil || !p.Addr().Is4() || p.Bits() > 30 || p.Addr() == p.Masked().Addr() {
					ck.add(fmt.Sprintf("%s.addresses[%d]", path, j), "%q is not an IPv4 host address with a prefix length of /30 or shorter, like 10.0.1.1/30", a)
				}
				ps[j] = p
			}
			if ps[0].IsValid() && ps[1].IsValid() && (ps[0].Masked() != ps[1].Masked() || ps[0].Addr() == ps[1].Addr()) {
				ck.add(path+".addresses", "%s and %s are not two addresses of one subnet", ps[0], ps[1])
			}
		default:
			ck.add(path+".addresses", "give both ends' addresses, or none")
		}
		if l.MTU != 0 && (l.MTU < linkemu.MinMTU || l.MTU > linkemu.MaxMTU) {
			ck.add(path+".mtu", "%d is not between %d and %d", l.MTU, linkemu.MinMTU, linkemu.MaxMTU)
		}
		checkEmulation(ck, path, l.Rate, l.Delay, l.Queue, l.Loss, l.mtu())
	}
	return links
}

// validateRoles checks what depends on roles and links together: the
// links of xtrs and hosts, and the roles a lab needs.
func (t *Topology) validateRoles(ck *checker, nodes map[string]*Node, sites map[string]*Site, links map[string]*Link) {
	xtrOf := map[string]string{}
	hasMS, numMS, hasDDT := false, 0, false
	for i, n := range t.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		switch n.Role {
		case RoleDDT:
			hasDDT = true
		case RoleMS:
			hasMS = true
			numMS++
		case RoleXTR:
			if other, ok := xtrOf[n.Site]; ok && n.Site != "" {
				ck.add(path+".site", "site %s already has xtr %s: a site has one xTR here", n.Site, other)
			}
			xtrOf[n.Site] = n.Name
			for field, names := range map[string][]string{"eid-links": n.EIDLinks, "rloc-links": n.RLOCLinks} {
				for j, name := range names {
					l := links[name]
					if l == nil || !slices.Contains(l.Ends, n.Name) {
						ck.add(fmt.Sprintf("%s.%s[%d]", path, field, j), "%q is not a link of %s", name, n.Name)
					}
				}
			}
		}
	}
	lispNodes := 0
	for _, n := range t.Nodes {
		if n.Role == RoleXTR || n.Role == RoleRTR {
			lispNodes++
		}
	}
	if lispNodes > 0 && !hasMS {
		ck.add("nodes", "xtrs and rtrs need a map-resolver: add a node of role ms")
	}
	if hasDDT && !hasMS {
		ck.add("nodes", "a ddt-node refers sites to map-servers: add a node of role ms")
	}
	for i, s := range t.Sites {
		served := map[string]bool{}
		for _, ms := range s.MapServers {
			if n := nodes[ms]; n != nil && n.Role == RoleMS {
				served[ms] = true
			}
		}
		if len(s.MapServers) > 0 && len(served) < numMS && !hasDDT {
			ck.add(fmt.Sprintf("sites[%d].map-servers", i),
				"the other ms nodes cannot resolve site %s without a node of role ddt-node to refer them", s.Name)
		}
	}
	for i, s := range t.Sites {
		if _, ok := xtrOf[s.Name]; !ok && s.Name != "" {
			ck.add(fmt.Sprintf("sites[%d]", i), "no xtr of role xtr has site: %s", s.Name)
		}
	}
	for i, n := range t.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		if n.Role != RoleHost {
			continue
		}
		var first *Link
		for j := range t.Links {
			if slices.Contains(t.Links[j].Ends, n.Name) {
				first = &t.Links[j]
				break
			}
		}
		if first == nil {
			ck.add(path, "host %s has no link", n.Name)
			continue
		}
		if n.Site != "" {
			peer := nodes[first.other(n.Name)]
			if peer == nil || peer.Role != RoleXTR || peer.Site != n.Site {
				ck.add(path+".site", "host %s's first link (%s) does not go to the xtr of site %s", n.Name, first.Name, n.Site)
			}
		}
		if n.PM != nil && n.PM.Policy == pm.PolicyAMPTCP && !hasMS && (n.PM.AMPTCP == nil || n.PM.AMPTCP.MapResolver == "") {
			ck.add(path+".pm.amptcp.map-resolver", "missing, and the lab has no ms node to ask")
		}
	}
}

// other is the end of l that is not name.
func (l *Link) other(name string) string {
	if len(l.Ends) != 2 {
		return ""
	}
	if l.Ends[0] == name {
		return l.Ends[1]
	}
	return l.Ends[0]
}

func (t *Topology) validateTimeline(ck *checker, links map[string]*Link) {
	for i, e := range t.Timeline {
		path := fmt.Sprintf("timeline[%d]", i)
		if e.At.Duration < 0 || e.At.Duration%time.Millisecond != 0 {
			ck.add(path+".at", "%v is not a time from the start of the run, in whole milliseconds", e.At.Duration)
		}
		l := links[e.Link]
		if l == nil {
			ck.add(path+".link", "%q is not a link", e.Link)
		}
		set := e.Rate != "" || e.Delay != "" || e.Loss != nil || e.Queue != ""
		switch e.Action {
		case ActionDown, ActionUp:
			if set || e.Direction != "" {
				ck.add(path, "%s takes no direction, rate, delay, loss or queue", e.Action)
			}
			switch {
			case e.End != "" && e.End != "a" && e.End != "b":
				ck.add(path+".end", "%q is not a (the link's first end) or b", e.End)
			case e.End == "" && l != nil && !l.Emulated():
				ck.add(path+".link", "%s is not emulated: only an end of it (end: a or b) can go %s", l.Name, e.Action)
			}
		case ActionSet:
			if e.End != "" {
				ck.add(path+".end", "only down and up take an end")
			}
			if !set {
				ck.add(path, "set changes at least one of rate, delay, loss, queue")
			}
			if l != nil && !l.Emulated() {
				ck.add(path+".link", "%s is not emulated (give it a rate, delay, loss or queue): a veth has nothing to set", l.Name)
			}
			if e.Direction != "" && e.Direction != "a-to-b" && e.Direction != "b-to-a" {
				ck.add(path+".direction", "%q is not a-to-b or b-to-a", e.Direction)
			}
			mtu := DefaultMTU
			if l != nil {
				mtu = l.mtu()
			}
			checkEmulation(ck, path, e.Rate, e.Delay, e.Queue, e.Loss, mtu)
		default:
			ck.add(path+".action", "%q is not down, up or set", e.Action)
		}
	}
}

// checkEmulation checks the emulation fields that are set.
func checkEmulation(ck *checker, path, rate, delay, queue string, loss *Loss, mtu int) {
	if rate != "" {
		if _, err := ParseRate(rate); err != nil {
			ck.add(path+".rate", "%v", err)
		}
	}
	if delay != "" {
		if _, err := parseDelay(delay); err != nil {
			ck.add(path+".delay", "%v", err)
		}
	}
	if queue != "" {
		if _, err := ParseQueue(queue, mtu); err != nil {
			ck.add(path+".queue", "%v", err)
		}
	}
	if loss != nil {
		m, err := loss.Model()
		var fe config.FieldError
		switch {
		case errors.As(err, &fe):
			ck.add(path+".loss."+fe.Path, "%s", fe.Msg)
			return
		case err != nil:
			ck.add(path+".loss", "%v", err)
			return
		}
		p := linkemu.Params{Rate: 1, Loss: m, QueueBytes: linkemu.MaxMTU + linkemu.EthernetHeader}
		var errs config.Errors
		if errors.As(p.Validate(mtu), &errs) {
			for _, e := range errs {
				ck.add(path+"."+lossPath(m.Model, e.Path), "%s", e.Msg)
			}
		}
	}
}

// lossPath names a linkemu loss field as the topology writes it.
func lossPath(model linkemu.LossModel, p string) string {
	switch p {
	case "loss.p":
		if model == linkemu.Bernoulli {
			return "loss.bernoulli"
		}
		return "loss.gilbert-elliott.p"
	case "loss.r":
		return "loss.gilbert-elliott.r"
	case "loss.loss-good":
		return "loss.gilbert-elliott.k"
	case "loss.loss-bad":
		return "loss.gilbert-elliott.h"
	}
	return p
}
