package testnet

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

// Link is a veth pair between two nodes.
type Link struct {
	net          *Net
	a, b         *Node
	ifA, ifB     string
	addrA, addrB []*netlink.Addr
}

// linkPrefix starts the interface names of one Net's links; it is also what
// cleanup looks for in the root namespace.
func linkPrefix(netID int64) string { return fmt.Sprintf("%s-%d-", testenv.Prefix, netID) }

// ifName names one end of a link. Interface names have at most 15 bytes
// (IFNAMSIZ-1), too few for node names, so ends are numbered instead:
// "at1x2y-3-2a" is end a of link 2 of Net 3. Use Link.Iface to find them.
func ifName(netID int64, linkID int, end byte) (string, error) {
	name := fmt.Sprintf("%s%d%c", linkPrefix(netID), linkID, end)
	if len(name) > unix.IFNAMSIZ-1 {
		return "", fmt.Errorf("interface name %s is longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	return name, nil
}

// Link joins a and b with a veth pair, both ends up, with the given CIDR
// addresses: "10.0.1.1/24", "fd00:1::1/64", a comma-separated list of
// both for a dual-stack link, or "" for none. IPv6
// addresses skip duplicate address detection, so both families carry
// traffic as soon as Link returns.
func (n *Net) Link(a, b *Node, addrA, addrB string) *Link {
	n.t.Helper()
	l, err := n.link(a, b, addrA, addrB)
	if err != nil {
		n.t.Fatalf("testnet: link %s-%s: %v", a.name, b.name, err)
	}
	return l
}

func (n *Net) link(a, b *Node, addrA, addrB string) (*Link, error) {
	if a == b || a.net != n || b.net != n {
		return nil, errors.New("need two distinct nodes of this Net")
	}
	l := &Link{net: n, a: a, b: b}
	var err error
	if l.addrA, err = parseAddrs(addrA); err != nil {
		return nil, err
	}
	if l.addrB, err = parseAddrs(addrB); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.linkIDs++
	id := n.linkIDs
	n.mu.Unlock()
	if l.ifA, err = ifName(n.id, id, 'a'); err != nil {
		return nil, err
	}
	if l.ifB, err = ifName(n.id, id, 'b'); err != nil {
		return nil, err
	}
	// Created through a's handle, so end a is born in a's namespace and
	// the peer directly in b's: no end ever appears in the root namespace.
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.ifA},
		PeerName:      l.ifB,
		PeerNamespace: netlink.NsFd(b.fd),
	}
	if err := a.nl.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth %s: %w", l.ifA, err)
	}
	n.mu.Lock()
	n.links = append(n.links, l)
	n.mu.Unlock()
	if err := l.setUp(); err != nil {
		return nil, err
	}
	return l, nil
}

// parseAddrs reads a comma-separated list of CIDR addresses; IPv6 ones
// get the no-DAD flag.
func parseAddrs(s string) ([]*netlink.Addr, error) {
	var addrs []*netlink.Addr
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ip, ipnet, err := net.ParseCIDR(f)
		if err != nil {
			return nil, fmt.Errorf("parse address: %w", err)
		}
		ipnet.IP = ip
		a := &netlink.Addr{IPNet: ipnet}
		if ip.To4() == nil {
			a.Flags = unix.IFA_F_NODAD
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// Iface is the name of l's end in nd, for code that needs the interface
// (qdiscs, BPF programs, SO_BINDTODEVICE).
func (l *Link) Iface(nd *Node) string {
	switch nd {
	case l.a:
		return l.ifA
	case l.b:
		return l.ifB
	}
	panic(fmt.Sprintf("testnet: node %s is not an end of link %s", nd.name, l.ifA))
}

// SetDown takes both ends down, as `ip link set down` does: traffic stops
// in both directions and the kernel drops the routes through the link; the
// addresses stay (see Node).
func (l *Link) SetDown() error {
	for _, e := range l.ends() {
		link, err := e.nd.nl.LinkByName(e.ifName)
		if err != nil {
			return fmt.Errorf("find %s: %w", e.ifName, err)
		}
		if err := e.nd.nl.LinkSetDown(link); err != nil {
			return fmt.Errorf("set %s down: %w", e.ifName, err)
		}
	}
	return nil
}

// SetUp brings both ends up again, restores the routes that AddRoute sent
// through this link and SetDown lost, and returns once IPv6 can use the
// link.
func (l *Link) SetUp() error { return l.setUp() }

type end struct {
	nd     *Node
	ifName string
	addrs  []*netlink.Addr
}

func (l *Link) ends() [2]end {
	return [2]end{{l.a, l.ifA, l.addrA}, {l.b, l.ifB, l.addrB}}
}

func (l *Link) setUp() error {
	for _, e := range l.ends() {
		link, err := e.nd.nl.LinkByName(e.ifName)
		if err != nil {
			return fmt.Errorf("find %s: %w", e.ifName, err)
		}
		if err := e.nd.nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", e.ifName, err)
		}
		for _, a := range e.addrs {
			if err := e.nd.nl.AddrReplace(link, a); err != nil {
				return fmt.Errorf("add address %s to %s: %w", a.IPNet, e.ifName, err)
			}
		}
		if err := e.nd.restoreRoutes(link.Attrs().Index); err != nil {
			return err
		}
	}
	for _, e := range l.ends() {
		if err := e.waitUsable(); err != nil {
			return err
		}
	}
	return nil
}

// usableTimeout bounds the wait for IPv6 to become usable on a link, which
// takes a few milliseconds.
const usableTimeout = 5 * time.Second

// waitUsable waits until neighbour discovery works for the end's IPv6
// addresses. The kernel finishes setting them up in work queues after the
// link is set up here, and a datagram that comes too early waits for a
// neighbour solicitation that is retried only a second later:
//   - an address stays tentative until the link watcher has seen the
//     carrier come up, about 2 ms later, even without duplicate address
//     detection;
//   - the link-local address, which solicitations are sent from, appears
//     only then;
//   - the address's solicited-node multicast group is joined from another
//     work item; until then the node drops the solicitations for it (one
//     Link in five returned before the join, and one first datagram in
//     about 300 was late).
func (e end) waitUsable() error {
	deadline := time.Now().Add(usableTimeout)
	for {
		missing, err := e.notUsable()
		if err != nil || missing == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for IPv6 on %s: %s after %v", e.ifName, missing, usableTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// notUsable says what the end's IPv6 still lacks, or "" when nothing.
func (e end) notUsable() (string, error) {
	link, err := e.nd.nl.LinkByName(e.ifName)
	if err != nil {
		return "", fmt.Errorf("find %s: %w", e.ifName, err)
	}
	addrs, err := e.nd.nl.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return "", fmt.Errorf("list addresses of %s: %w", e.ifName, err)
	}
	groups, err := e.nd.multicastGroups(e.ifName)
	if err != nil {
		return "", err
	}
	linkLocal := false
	for _, a := range addrs {
		switch {
		case a.Flags&unix.IFA_F_TENTATIVE != 0:
			return fmt.Sprintf("address %s still tentative", a.IP), nil
		case !groups[solicitedNode(a.IP)]:
			return fmt.Sprintf("solicited-node group of %s not joined", a.IP), nil
		case a.IP.IsLinkLocalUnicast():
			linkLocal = true
		}
	}
	if !linkLocal {
		return "no link-local address", nil
	}
	return "", nil
}

// solicitedNode is the multicast group ff02::1:ffXX:XXXX that neighbour
// solicitations for ip go to (RFC 4291 section 2.7.1).
func solicitedNode(ip net.IP) netip.Addr {
	g := netip.MustParseAddr("ff02::1:ff00:0").As16()
	copy(g[13:], ip.To16()[13:])
	return netip.AddrFrom16(g)
}

// multicastGroups reads the IPv6 groups that ifName has joined from the
// node's /proc/net/igmp6: "index name group users flags timer", the group
// in 32 hex digits.
func (nd *Node) multicastGroups(ifName string) (map[netip.Addr]bool, error) {
	var table []byte
	err := nd.Do(func() (err error) {
		// thread-self: /proc/self/net would show the main thread's namespace.
		table, err = os.ReadFile("/proc/thread-self/net/igmp6")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read multicast groups: %w", err)
	}
	groups := make(map[netip.Addr]bool)
	for line := range strings.Lines(string(table)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != ifName {
			continue
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("read multicast groups: bad group %q", f[2])
		}
		groups[netip.AddrFrom16([16]byte(b))] = true
	}
	return groups, nil
}

// delete removes the pair by its a end (the peer goes with it), so that
// the link is gone when cleanup returns, not whenever the namespace's
// asynchronous teardown gets to it.
func (l *Link) delete() error {
	link, err := l.a.nl.LinkByName(l.ifA)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err == nil {
		err = l.a.nl.LinkDel(link)
	}
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", l.ifA, err)
	}
	return nil
}

// AddRoute adds a route to dst (a CIDR, or "default") through the gateway
// via, which must be on one of the node's links.
func (nd *Node) AddRoute(dst, via string) {
	nd.net.t.Helper()
	if err := nd.addRoute(dst, via); err != nil {
		nd.net.t.Fatalf("testnet: node %s: %v", nd.name, err)
	}
}

func (nd *Node) addRoute(dst, via string) error {
	gw := net.ParseIP(via)
	if gw == nil {
		return fmt.Errorf("add route to %s: gateway %q is not an IP address", dst, via)
	}
	r := netlink.Route{Gw: gw}
	if dst != "default" {
		_, ipnet, err := net.ParseCIDR(dst)
		if err != nil {
			return fmt.Errorf("add route: %w", err)
		}
		r.Dst = ipnet
	}
	// Pin the device, so that SetUp knows which routes to restore.
	hops, err := nd.nl.RouteGet(gw)
	if err != nil || len(hops) == 0 {
		return fmt.Errorf("add route to %s: gateway %s unreachable: %v", dst, via, err)
	}
	r.LinkIndex = hops[0].LinkIndex
	if err := nd.nl.RouteAdd(&r); err != nil {
		return fmt.Errorf("add route to %s via %s: %w", dst, via, err)
	}
	nd.mu.Lock()
	nd.routes = append(nd.routes, r)
	nd.mu.Unlock()
	return nil
}

func (nd *Node) restoreRoutes(ifindex int) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, r := range nd.routes {
		if r.LinkIndex != ifindex {
			continue
		}
		if err := nd.nl.RouteReplace(&r); err != nil {
			return fmt.Errorf("restore route via %s: %w", r.Gw, err)
		}
	}
	return nil
}

// RemoveRootLinks deletes the links of the root namespace (the caller's)
// whose names start with prefix and returns their names. A TestMain can
// call it with testenv.Prefix+"-" (the dash keeps run "at12" off run
// "at123"'s links) to catch links that escaped their namespace.
func RemoveRootLinks(prefix string) ([]string, error) {
	names, err := netns.Links(prefix)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range names {
		errs = append(errs, netns.DeleteLink(name))
	}
	return names, errors.Join(errs...)
}
