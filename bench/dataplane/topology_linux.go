package dataplane

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

// network is the namespaces and veth links of one variant. Everything is
// named with the run's prefixes and removed by name in close; veth ends
// are created directly inside their namespaces and never appear in the
// root namespace.
type network struct {
	prefix string  // of the namespaces: <run prefix><variant>-
	ifaces *ifSeq  // names the links' ends
	nodes  []*node // in creation order
	links  []*veth
}

// ifSeq numbers the interfaces of a run: "<prefix><n><a|b>", within the
// 15 bytes of an interface name.
type ifSeq struct {
	prefix string
	n      int
}

func (s *ifSeq) next(suffix string) (string, error) {
	s.n++
	name := fmt.Sprintf("%s%d%s", s.prefix, s.n, suffix)
	if len(name) > unix.IFNAMSIZ-1 {
		return "", fmt.Errorf("interface name %s is longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	return name, nil
}

// node is one namespace.
type node struct {
	name string // short: "client", "r1"
	ns   *netns.NS
	fd   vns.NsHandle
	nl   *netlink.Handle
}

// veth is a link between two nodes.
type veth struct {
	a, b       *node
	ifA, ifB   string
	addrA, ipB string // addrA with its length, ipB without
}

func (n *network) node(name string) (*node, error) {
	ns, err := netns.Create(n.prefix + name)
	if err != nil {
		return nil, err
	}
	nd := &node{name: name, ns: ns, fd: -1}
	n.nodes = append(n.nodes, nd) // before configuring: close removes a half-built node
	if nd.fd, err = vns.GetFromPath(ns.Path()); err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns.Name, err)
	}
	if nd.nl, err = netlink.NewHandleAt(nd.fd); err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns.Name, err)
	}
	lo, err := nd.nl.LinkByName("lo")
	if err == nil {
		err = nd.nl.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("set lo up in %s: %w", ns.Name, err)
	}
	return nd, nil
}

// link joins a and b with a veth pair, both ends up, with IPv4 addresses
// in CIDR form.
func (n *network) link(a, b *node, addrA, addrB string) (*veth, error) {
	ifA, err := n.ifaces.next("a")
	if err != nil {
		return nil, err
	}
	ifB := ifA[:len(ifA)-1] + "b"
	l := &veth{a: a, b: b, ifA: ifA, ifB: ifB, addrA: addrA}
	l.ipB, _, _ = strings.Cut(addrB, "/")
	// Created through a's handle, with the peer born in b's namespace.
	err = a.nl.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: ifA},
		PeerName:      ifB,
		PeerNamespace: netlink.NsFd(b.fd),
	})
	if err != nil {
		return nil, fmt.Errorf("add veth %s between %s and %s: %w", ifA, a.name, b.name, err)
	}
	n.links = append(n.links, l)
	if err := a.up(ifA, addrA); err != nil {
		return nil, err
	}
	if err := b.up(ifB, addrB); err != nil {
		return nil, err
	}
	return l, nil
}

// iface is the name of l's end in nd.
func (l *veth) iface(nd *node) string {
	if nd == l.a {
		return l.ifA
	}
	return l.ifB
}

// up gives an interface of the node its address and brings it up.
func (nd *node) up(iface, cidr string) error {
	link, err := nd.nl.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", iface, nd.name, err)
	}
	if cidr != "" {
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := nd.nl.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add %s to %s in %s: %w", cidr, iface, nd.name, err)
		}
	}
	if err := nd.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up in %s: %w", iface, nd.name, err)
	}
	return nil
}

// route adds a route to dst (CIDR, or "default") through the gateway via.
func (nd *node) route(dst, via string) error {
	r := netlink.Route{Gw: net.ParseIP(via)}
	if r.Gw == nil {
		return fmt.Errorf("route to %s in %s: gateway %q is no IP address", dst, nd.name, via)
	}
	if dst != "default" {
		_, ipnet, err := net.ParseCIDR(dst)
		if err != nil {
			return fmt.Errorf("route in %s: %w", nd.name, err)
		}
		r.Dst = ipnet
	}
	if err := nd.nl.RouteAdd(&r); err != nil {
		return fmt.Errorf("route to %s via %s in %s: %w", dst, via, nd.name, err)
	}
	return nil
}

// sysctl writes a per-namespace net.* sysctl.
func (nd *node) sysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	// /proc/sys/net resolves against the calling thread's namespace.
	err := nd.ns.Do(func() error { return os.WriteFile(path, []byte(value), 0o644) })
	if err != nil {
		return fmt.Errorf("set %s in %s: %w", key, nd.name, err)
	}
	return nil
}

// counters reads the packet and byte counters of an interface.
func (nd *node) counters(iface string) (*netlink.LinkStatistics, error) {
	link, err := nd.nl.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("read counters of %s in %s: %w", iface, nd.name, err)
	}
	st := link.Attrs().Statistics
	if st == nil {
		return nil, fmt.Errorf("read counters of %s in %s: none reported", iface, nd.name)
	}
	return st, nil
}

// close deletes the links by name, then the namespaces. The caller has
// stopped the processes in them, which would keep a namespace alive
// after its name is gone.
func (n *network) close() error {
	var errs []error
	for _, l := range n.links {
		link, err := l.a.nl.LinkByName(l.ifA)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			continue
		}
		if err == nil {
			err = l.a.nl.LinkDel(link)
		}
		if err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", l.ifA, err))
		}
	}
	for _, nd := range n.nodes {
		if nd.nl != nil {
			nd.nl.Close()
		}
		if nd.fd >= 0 {
			nd.fd.Close()
		}
		if err := nd.ns.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	n.links, n.nodes = nil, nil
	return errors.Join(errs...)
}
