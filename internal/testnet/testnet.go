// Package testnet builds small networks of namespaces for end-to-end tests:
// nodes (named network namespaces) joined by veth links, with addresses,
// routes and forwarding, and runs Go code and programs inside them.
//
// Everything a Net creates carries testenv.Prefix in its name and is
// removed in the test's cleanup: processes by PID, sockets, links and
// namespaces, so that testenv.Main finds nothing left over and a later test
// can reuse the same addresses. Veth ends are created directly inside their
// namespaces and never exist in the root namespace, so a test cannot
// disturb the host's interfaces.
//
// The methods that build the topology (Node, Link, AddRoute, SetSysctl,
// EnableForwarding, Start) fail the test on error, like testenv.NetNS
// does, and must be called from the goroutine of the test; the ones that
// act on it while the test runs (SetDown, SetUp, Stop, Exec, the socket
// helpers) return errors and may be called from any goroutine.
package testnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

// netCounter numbers the Nets of this process, so that parallel tests and
// subtests that use the same node names do not collide.
var netCounter atomic.Int64

// Net is the topology of one test.
type Net struct {
	t  testing.TB
	id int64

	mu      sync.Mutex
	linkIDs int
	nodes   []*Node
	links   []*Link
	procs   []*Process
	closers []interface{ Close() error }
}

// New returns an empty topology that is torn down when t ends. It needs
// root and skips (or fails, see testenv.Require) without it.
func New(t testing.TB) *Net {
	t.Helper()
	testenv.RequireRoot(t)
	n := &Net{t: t, id: netCounter.Add(1)}
	t.Cleanup(n.cleanup)
	return n
}

// Node is one network namespace of a Net.
type Node struct {
	net  *Net
	name string
	ns   *netns.NS
	fd   vns.NsHandle
	nl   *netlink.Handle

	mu     sync.Mutex
	routes []netlink.Route // as added by AddRoute, to restore after SetUp
}

// Node creates a namespace "<prefix>-<net>-<name>" with lo up; the Net's
// number in the name keeps parallel tests that reuse node names apart.
// IPv6 duplicate address detection is off in it, so that addresses are
// usable as soon as Link returns, and IPv6 addresses stay on a link that is
// down (keep_addr_on_down), as IPv4 ones do, so that SetDown means the same
// for both families.
func (n *Net) Node(name string) *Node {
	n.t.Helper()
	if name == "" || strings.ContainsAny(name, "/ ") {
		n.t.Fatalf("testnet: invalid node name %q", name)
	}
	nsName := fmt.Sprintf("%s-%d-%s", testenv.Prefix, n.id, name)
	ns, err := netns.Create(nsName)
	if err != nil {
		n.t.Fatalf("testnet: %v", err)
	}
	nd := &Node{net: n, name: nsName, ns: ns, fd: -1}
	// Register before configuring, so that cleanup removes a half-built node.
	n.mu.Lock()
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	if err := nd.open(); err != nil {
		n.t.Fatalf("testnet: node %s: %v", name, err)
	}
	return nd
}

// open gets the netlink handle that configures the node from any thread,
// brings lo up and sets the IPv6 defaults that new links inherit.
func (nd *Node) open() error {
	fd, err := vns.GetFromPath(nd.ns.Path())
	if err != nil {
		return fmt.Errorf("open namespace: %w", err)
	}
	nd.fd = fd
	nd.nl, err = netlink.NewHandleAt(fd)
	if err != nil {
		return fmt.Errorf("open netlink handle: %w", err)
	}
	lo, err := nd.nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := nd.nl.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.all.keep_addr_on_down", "1"},
		{"net.ipv6.conf.default.keep_addr_on_down", "1"},
	} {
		if err := nd.sysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// Name is the namespace's name, as `ip netns` shows it.
func (nd *Node) Name() string { return nd.name }

// Path is the namespace's bind mount, for setns(2) or nsenter.
func (nd *Node) Path() string { return nd.ns.Path() }

// Do runs fn on a locked OS thread inside the namespace. Sockets that fn
// opens stay in the namespace; goroutines that fn starts do not.
func (nd *Node) Do(fn func() error) error { return nd.ns.Do(fn) }

// Netlink is a handle for this namespace, usable from any goroutine, for
// configuration this package does not cover (qdiscs, BPF filters, neighbours).
func (nd *Node) Netlink() *netlink.Handle { return nd.nl }

// SetSysctl writes a net.* sysctl such as "net.ipv4.tcp_congestion_control"
// in this namespace only. Other keys are global to the host and refused.
func (nd *Node) SetSysctl(key, value string) {
	nd.net.t.Helper()
	if err := nd.sysctl(key, value); err != nil {
		nd.net.t.Fatalf("testnet: node %s: %v", nd.name, err)
	}
}

// EnableForwarding makes the node a router for IPv4 and IPv6.
func (nd *Node) EnableForwarding() {
	nd.net.t.Helper()
	nd.SetSysctl("net.ipv4.ip_forward", "1")
	nd.SetSysctl("net.ipv6.conf.all.forwarding", "1")
}

func (nd *Node) sysctl(key, value string) error {
	if !strings.HasPrefix(key, "net.") {
		return fmt.Errorf("set sysctl %s: not a per-namespace net.* key", key)
	}
	// /proc/sys/net resolves against the calling thread's namespace.
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	err := nd.Do(func() error { return os.WriteFile(path, []byte(value), 0o644) })
	if err != nil {
		return fmt.Errorf("set sysctl %s: %w", key, err)
	}
	return nil
}

// track registers something that cleanup must close.
func (n *Net) track(c interface{ Close() error }) {
	n.mu.Lock()
	n.closers = append(n.closers, c)
	n.mu.Unlock()
}

// cleanup tears the topology down in the order that lets each namespace
// really disappear: a running process or an open socket would keep it
// alive after its name is gone.
func (n *Net) cleanup() {
	n.mu.Lock()
	procs, closers, links, nodes := n.procs, n.closers, n.links, n.nodes
	n.procs, n.closers, n.links, n.nodes = nil, nil, nil, nil
	n.mu.Unlock()

	var errs []error
	for _, p := range procs {
		p.Stop() // its exit status is the test's business, not cleanup's
	}
	for _, c := range closers {
		c.Close() // the test may have closed it already
	}
	for _, nd := range nodes {
		// What closing left unacknowledged would retransmit, and keep
		// the namespace, for minutes; a kernel built without
		// INET_DIAG_DESTROY lets it.
		if _, err := nd.ns.ResetTCP(); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			errs = append(errs, err)
		}
	}
	for _, l := range links {
		if err := l.delete(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, nd := range nodes {
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
	// Ends are never created in the root namespace; check that it stays so.
	leaked, err := RemoveRootLinks(linkPrefix(n.id))
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range leaked {
		errs = append(errs, fmt.Errorf("link %s leaked into the root namespace", name))
	}
	if err := errors.Join(errs...); err != nil {
		n.t.Errorf("testnet: cleanup: %v", err)
	}
}
