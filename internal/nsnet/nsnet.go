// Package nsnet builds networks of named network namespaces joined by veth
// links, for the programs that build their own (the benchmarks behind
// `amptcp bench`); tests use internal/testnet, which does the same bound to
// a test's lifetime.
//
// Everything is named with the caller's prefixes and removed by name in
// Close; veth ends are created directly inside their namespaces and never
// appear in the root namespace.
package nsnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
)

// Net is the namespaces and veth links of one network.
type Net struct {
	prefix string // of the namespaces' names
	ifaces *IfNames
	nodes  []*Node // in creation order
	links  []*Veth
}

// New returns an empty network whose namespaces are named
// "<prefix><node>" and whose links' ends ifaces names.
func New(prefix string, ifaces *IfNames) *Net { return &Net{prefix: prefix, ifaces: ifaces} }

// IfNames numbers interfaces: "<Prefix><n><a|b>", within the 15 bytes of
// an interface name. Networks that share one have distinct names, so that
// a link leaked into the root namespace is found by the prefix.
type IfNames struct {
	Prefix string
	n      int
}

// Next is the next name, ending in suffix.
func (s *IfNames) Next(suffix string) (string, error) {
	s.n++
	name := fmt.Sprintf("%s%d%s", s.Prefix, s.n, suffix)
	if len(name) > unix.IFNAMSIZ-1 {
		return "", fmt.Errorf("interface name %s is longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	return name, nil
}

// Node is one namespace.
type Node struct {
	Name string // short: "client", "r1"
	NS   *netns.NS
	// NL configures the namespace from any thread.
	NL *netlink.Handle
	fd vns.NsHandle
}

// Veth is a link between two nodes.
type Veth struct {
	A, B     *Node
	IfA, IfB string
}

// Node creates the namespace "<prefix><name>" with lo up.
func (n *Net) Node(name string) (*Node, error) {
	ns, err := netns.Create(n.prefix + name)
	if err != nil {
		return nil, err
	}
	nd := &Node{Name: name, NS: ns, fd: -1}
	n.nodes = append(n.nodes, nd) // before configuring: Close removes a half-built node
	if nd.fd, err = vns.GetFromPath(ns.Path()); err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns.Name, err)
	}
	if nd.NL, err = netlink.NewHandleAt(nd.fd); err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns.Name, err)
	}
	lo, err := nd.NL.LinkByName("lo")
	if err == nil {
		err = nd.NL.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("set lo up in %s: %w", ns.Name, err)
	}
	return nd, nil
}

// IfName names another interface of the network, such as a tunnel
// device, as its links' ends are named.
func (n *Net) IfName(suffix string) (string, error) { return n.ifaces.Next(suffix) }

// Links are the links made so far, in creation order.
func (n *Net) Links() []*Veth { return n.links }

// Link joins a and b with a veth pair, both ends up, with IPv4 addresses
// in CIDR form.
func (n *Net) Link(a, b *Node, addrA, addrB string) (*Veth, error) {
	ifA, err := n.ifaces.Next("a")
	if err != nil {
		return nil, err
	}
	ifB := ifA[:len(ifA)-1] + "b"
	l := &Veth{A: a, B: b, IfA: ifA, IfB: ifB}
	// Created through a's handle, with the peer born in b's namespace.
	err = a.NL.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: ifA},
		PeerName:      ifB,
		PeerNamespace: netlink.NsFd(b.fd),
	})
	if err != nil {
		return nil, fmt.Errorf("add veth %s between %s and %s: %w", ifA, a.Name, b.Name, err)
	}
	n.links = append(n.links, l)
	if err := a.Up(ifA, addrA); err != nil {
		return nil, err
	}
	if err := b.Up(ifB, addrB); err != nil {
		return nil, err
	}
	return l, nil
}

// Iface is the name of l's end in nd.
func (l *Veth) Iface(nd *Node) string {
	if nd == l.A {
		return l.IfA
	}
	return l.IfB
}

// Up gives an interface of the node its address (none if cidr is empty)
// and brings it up.
func (nd *Node) Up(iface, cidr string) error {
	link, err := nd.NL.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", iface, nd.Name, err)
	}
	if cidr != "" {
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := nd.NL.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add %s to %s in %s: %w", cidr, iface, nd.Name, err)
		}
	}
	if err := nd.NL.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up in %s: %w", iface, nd.Name, err)
	}
	return nil
}

// SetDown takes an interface of the node down.
func (nd *Node) SetDown(iface string) error {
	link, err := nd.NL.LinkByName(iface)
	if err == nil {
		err = nd.NL.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("set %s down in %s: %w", iface, nd.Name, err)
	}
	return nil
}

// Route adds a route to dst (CIDR, or "default") through the gateway via,
// in the main table.
func (nd *Node) Route(dst, via string) error { return nd.RouteIn(unix.RT_TABLE_MAIN, dst, via) }

// RouteIn adds a route to dst (CIDR, or "default") through the gateway
// via, in the routing table table.
func (nd *Node) RouteIn(table int, dst, via string) error {
	r := netlink.Route{Gw: net.ParseIP(via), Table: table}
	if r.Gw == nil {
		return fmt.Errorf("route to %s in %s: gateway %q is no IP address", dst, nd.Name, via)
	}
	if dst != "default" {
		_, ipnet, err := net.ParseCIDR(dst)
		if err != nil {
			return fmt.Errorf("route in %s: %w", nd.Name, err)
		}
		r.Dst = ipnet
	}
	if err := nd.NL.RouteAdd(&r); err != nil {
		return fmt.Errorf("route to %s via %s in %s: %w", dst, via, nd.Name, err)
	}
	return nil
}

// RuleFrom has what src (an address) sends looked up in table.
func (nd *Node) RuleFrom(src string, table int) error {
	ip := net.ParseIP(src)
	if ip == nil {
		return fmt.Errorf("rule in %s: %q is no IP address", nd.Name, src)
	}
	r := netlink.NewRule()
	r.Src = &net.IPNet{IP: ip, Mask: net.CIDRMask(8*len(ip.To4()), 8*len(ip.To4()))}
	r.Table = table
	if err := nd.NL.RuleAdd(r); err != nil {
		return fmt.Errorf("rule from %s in %s: %w", src, nd.Name, err)
	}
	return nil
}

// Sysctl writes a per-namespace net.* sysctl.
func (nd *Node) Sysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	// /proc/sys/net resolves against the calling thread's namespace.
	err := nd.NS.Do(func() error { return os.WriteFile(path, []byte(value), 0o644) })
	if err != nil {
		return fmt.Errorf("set %s in %s: %w", key, nd.Name, err)
	}
	return nil
}

// Counters reads the packet and byte counters of an interface.
func (nd *Node) Counters(iface string) (*netlink.LinkStatistics, error) {
	link, err := nd.NL.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("read counters of %s in %s: %w", iface, nd.Name, err)
	}
	st := link.Attrs().Statistics
	if st == nil {
		return nil, fmt.Errorf("read counters of %s in %s: none reported", iface, nd.Name)
	}
	return st, nil
}

// Close deletes the links by name, then the namespaces. The caller has
// stopped the processes and closed the sockets in them, which would keep
// a namespace alive after its name is gone.
func (n *Net) Close() error {
	var errs []error
	for _, l := range n.links {
		link, err := l.A.NL.LinkByName(l.IfA)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			continue
		}
		if err == nil {
			err = l.A.NL.LinkDel(link)
		}
		if err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", l.IfA, err))
		}
	}
	for _, nd := range n.nodes {
		if nd.NL != nil {
			nd.NL.Close()
		}
		if nd.fd >= 0 {
			nd.fd.Close()
		}
		if err := nd.NS.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	n.links, n.nodes = nil, nil
	return errors.Join(errs...)
}

// Sweep removes the namespaces whose names start with prefix and the
// links of the root namespace whose names start with linkPrefix: what a
// run left behind after its networks were closed. It says what it found,
// as errors.
func Sweep(prefix, linkPrefix string) error {
	var errs []error
	if names, err := netns.List(prefix); err != nil {
		errs = append(errs, err)
	} else {
		for _, name := range names {
			errs = append(errs, fmt.Errorf("namespace %s was left; removing it", name), netns.Delete(name))
		}
	}
	if names, err := netns.Links(linkPrefix); err != nil {
		errs = append(errs, err)
	} else {
		for _, name := range names {
			errs = append(errs, fmt.Errorf("link %s leaked into the root namespace; removing it", name), netns.DeleteLink(name))
		}
	}
	return errors.Join(errs...)
}
