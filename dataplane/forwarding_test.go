package dataplane_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/mptcp"
)

// site is the two LISP sites of the forwarding tests, their xTRs joined
// by two underlay links, each xTR with an RLOC on each:
//
//	hostA 10.1.0.1, 10.1.0.2 -- xtrA ==(192.0.2.0/30, 192.0.2.4/30)== xtrB -- hostB 10.2.0.1
type sites struct {
	net                      *testnet.Net
	hostA, xtrA, xtrB, hostB *testnet.Node
	dpA, dpB                 *dataplane.Dataplane
	rlocA, rlocB             [2]string // the xTRs' RLOC interfaces
	siteB                    *testnet.Link
}

// newSites builds the sites with dp as both xTRs' data plane settings;
// newSitesXDP with every RLOC interface in xdp-interfaces too.
func newSites(t *testing.T, dp config.Dataplane) *sites { return newSitesXDP(t, dp, false) }

func newSitesXDP(t *testing.T, dp config.Dataplane, xdp bool) *sites {
	n := testnet.New(t)
	s := &sites{net: n, hostA: n.Node("hosta"), xtrA: n.Node("xtra"), xtrB: n.Node("xtrb"), hostB: n.Node("hostb")}
	siteA := n.Link(s.hostA, s.xtrA, "10.1.0.1/24,10.1.0.2/24", "10.1.0.254/24")
	a1 := n.Link(s.xtrA, s.xtrB, "192.0.2.1/30", "192.0.2.2/30")
	a2 := n.Link(s.xtrA, s.xtrB, "192.0.2.5/30", "192.0.2.6/30")
	siteB := n.Link(s.xtrB, s.hostB, "10.2.0.254/24", "10.2.0.1/24")
	s.hostA.AddRoute("default", "10.1.0.254")
	s.hostB.AddRoute("default", "10.2.0.254")
	s.xtrA.EnableForwarding()
	s.xtrB.EnableForwarding()

	// Each xTR's gateway on a link is the other's address.
	load := func(nd *testnet.Node, eid *testnet.Link, gateways []string, rlocs ...*testnet.Link) *dataplane.Dataplane {
		cfg := dp
		cfg.EIDInterfaces = []string{eid.Iface(nd)}
		cfg.RLOCGateways = map[string]string{}
		for i, l := range rlocs {
			cfg.RLOCInterfaces = append(cfg.RLOCInterfaces, l.Iface(nd))
			cfg.RLOCGateways[l.Iface(nd)] = gateways[i]
		}
		if xdp {
			cfg.XDPInterfaces = cfg.RLOCInterfaces
		}
		c := config.Config{Roles: []config.Role{config.RoleXTR}, Dataplane: &cfg}
		c.Defaults()
		var d *dataplane.Dataplane
		if err := nd.Do(func() (err error) { d, err = dataplane.New(&cfg, dataplane.Options{}); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	s.dpA = load(s.xtrA, siteA, []string{"192.0.2.2", "192.0.2.6"}, a1, a2)
	s.dpB = load(s.xtrB, siteB, []string{"192.0.2.1", "192.0.2.5"}, a1, a2)
	s.rlocA = [2]string{a1.Iface(s.xtrA), a2.Iface(s.xtrA)}
	s.rlocB = [2]string{a1.Iface(s.xtrB), a2.Iface(s.xtrB)}
	s.siteB = siteB
	put(t, s.dpA, "10.1.0.0/24", dataplane.Entry{Action: dataplane.NativelyForward})
	put(t, s.dpA, "10.2.0.0/24", twoRLOCs("192.0.2.2", "192.0.2.6"))
	put(t, s.dpB, "10.2.0.0/24", dataplane.Entry{Action: dataplane.NativelyForward})
	put(t, s.dpB, "10.1.0.0/24", twoRLOCs("192.0.2.1", "192.0.2.5"))
	return s
}

// hostA is hostA's first address, from any port.
var hostA = netip.MustParseAddrPort("10.1.0.1:0")

func twoRLOCs(a, b string) dataplane.Entry {
	path := func(addr string) dataplane.Path {
		return dataplane.Path{Hops: []dataplane.Hop{{Addr: netip.MustParseAddr(addr)}}, Priority: 1, Weight: 50, Up: true}
	}
	return dataplane.Entry{Paths: []dataplane.Path{path(a), path(b)}}
}

func put(t testing.TB, d *dataplane.Dataplane, prefix string, e dataplane.Entry) {
	t.Helper()
	if err := d.Put(dataplane.Key{Prefix: netip.MustParsePrefix(prefix)}, e); err != nil {
		t.Fatal(err)
	}
}

// transfer sends n random bytes from hostA (from the local address and
// port, over MPTCP or not) to a server on hostB that hashes them, and
// checks the hash.
func (s *sites) transfer(t *testing.T, local netip.AddrPort, mptcp bool, n int) {
	t.Helper()
	transfer(t, s.hostA, s.hostB, local, "10.2.0.1:0", mptcp, n, nil)
}

// transfer sends n random bytes from a node (from the local address and
// port, over MPTCP or not) to a server listening on addr of another that
// hashes them, and checks the hash. ready, if not nil, runs after the
// first 64 KiB are written, before the rest.
func transfer(t *testing.T, from, to *testnet.Node, local netip.AddrPort, addr string, mptcp bool, n int, ready func(net.Conn)) {
	t.Helper()
	ln, got := hashingServer(t, to, addr)
	defer ln.Close()
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(local)}
	d.SetMultipathTCP(mptcp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := from.Dial(ctx, d, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	first := 0
	if ready != nil {
		// An MPTCP client's connection is fully established, and its
		// path manager opens subflows, once the peer acknowledged data.
		first = min(n, 64<<10)
		if _, err := c.Write(data[:first]); err != nil {
			t.Fatalf("write: %v", err)
		}
		ready(c)
	}
	if _, err := c.Write(data[first:]); err != nil {
		t.Fatalf("write: %v", err)
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case h := <-got:
		if h != sha256.Sum256(data) {
			t.Fatalf("the server received other bytes than were sent")
		}
	case <-ctx.Done():
		t.Fatal("transfer timed out")
	}
	c.Close()
}

// hashingServer listens on addr of a node and hashes what the first
// connection sends until it closes.
func hashingServer(t *testing.T, nd *testnet.Node, addr string) (net.Listener, <-chan [32]byte) {
	t.Helper()
	ln, err := nd.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		h := sha256.New()
		io.Copy(h, c)
		got <- [32]byte(h.Sum(nil))
	}()
	return ln, got
}

func counters(t *testing.T, d *dataplane.Dataplane) dataplane.Counters {
	t.Helper()
	c, err := d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TCP crosses the overlay in both directions, its bytes intact, and only
// encapsulated: every segment out of site A is encapsulated by xtrA and
// decapsulated by xtrB, and the other way for the ACKs.
func TestForwardingTCP(t *testing.T) {
	s := newSites(t, config.Dataplane{})
	s.transfer(t, hostA, false, 8<<20)
	a, b := counters(t, s.dpA), counters(t, s.dpB)
	if a["itr_encapsulated"] == 0 || b["etr_decapsulated"] == 0 || b["itr_encapsulated"] == 0 || a["etr_decapsulated"] == 0 {
		t.Errorf("xtrA %v\nxtrB %v", nonZero(a), nonZero(b))
	}
	if a["itr_path0_bytes"]+a["itr_path1_bytes"] < 8<<20 {
		t.Errorf("xtrA encapsulated %d + %d bytes for an 8 MiB transfer", a["itr_path0_bytes"], a["itr_path1_bytes"])
	}
	for name, c := range map[string]dataplane.Counters{"xtrA": a, "xtrB": b} {
		for _, bad := range []string{"itr_no_route", "itr_too_big", "itr_encapsulation_failed", "etr_malformed", "etr_decapsulation_failed"} {
			if c[bad] != 0 {
				t.Errorf("%s: %s = %d", name, bad, c[bad])
			}
		}
	}
}

// An MPTCP connection whose client opens a second subflow (from its second
// address) gets each subflow on its own underlay link, in each direction.
func TestForwardingMPTCPSubflowsOnDistinctPaths(t *testing.T) {
	subflowsOnDistinctPaths(t, newSites(t, config.Dataplane{}))
}

// The same with the ETRs in XDP: what they decapsulate ahead of GRO
// still has its handshakes followed (by tc, after GRO), and xtrB binds
// the replies of the subflows.
func TestForwardingMPTCPSubflowsOnDistinctPathsXDP(t *testing.T) {
	s := newSitesXDP(t, config.Dataplane{}, true)
	subflowsOnDistinctPaths(t, s)
	if b := counters(t, s.dpB); b["etr_decapsulated_xdp"] == 0 {
		t.Errorf("xtrB decapsulated nothing in XDP: %v", nonZero(b))
	}
}

func subflowsOnDistinctPaths(t *testing.T, s *sites) {
	for _, cmd := range [][]string{
		{"ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"},
		{"ip", "mptcp", "endpoint", "add", "10.1.0.2", "subflow"},
	} {
		if out, err := s.hostA.Exec(t, cmd[0], cmd[1:]...); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	if out, err := s.hostB.Exec(t, "ip", "mptcp", "limits", "set", "subflows", "2"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// The bulk goes once the second subflow is up: on a busy machine the
	// kernel's path manager joined it after most of the 32 MiB had gone
	// (48 KB on its path once), and which path carries how much is the
	// scheduler's business, not the overlay's.
	transfer(t, s.hostA, s.hostB, hostA, "10.2.0.1:0", true, 32<<20, func(c net.Conn) {
		if err := awaitJoin(c.(syscall.Conn), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	subs, err := s.dpA.Subflows()
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].Connection != subs[1].Connection || subs[0].Path == subs[1].Path ||
		subs[0].Path < 0 || subs[1].Path < 0 {
		t.Fatalf("xtrA subflows %+v", subs)
	}
	a, b := counters(t, s.dpA), counters(t, s.dpB)
	if a["subflow_new"] != 1 || a["subflow_join"] != 1 || a["subflow_tokens_learned"] != 1 {
		t.Errorf("xtrA %v", nonZero(a))
	}
	// Both paths carry data: each subflow's bytes went out on its path.
	for _, sf := range subs {
		t.Logf("subflow %v-%v: %d bytes on path %d", sf.Local, sf.Remote, sf.Bytes, sf.Path)
		if sf.Bytes < 64<<10 {
			t.Errorf("subflow %v-%v carried %d bytes on path %d", sf.Local, sf.Remote, sf.Bytes, sf.Path)
		}
	}
	// xtrB saw the same handshakes from the other side and bound the
	// replies of each subflow to a path of its own too.
	subsB, err := s.dpB.Subflows()
	if err != nil {
		t.Fatal(err)
	}
	if len(subsB) != 2 || subsB[0].Path == subsB[1].Path || subsB[0].Initiator || b["subflow_join"] != 1 {
		t.Errorf("xtrB subflows %+v; counters %v", subsB, nonZero(b))
	}
}

// awaitJoin waits until the MPTCP connection c has a subflow besides its
// first one.
func awaitJoin(c syscall.Conn, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		fi, err := mptcp.ReadFullInfo(c)
		if err != nil {
			return fmt.Errorf("read the connection's subflows: %w", err)
		}
		if fi.Info.Subflows >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no second subflow joined within %v", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nonZero(c dataplane.Counters) map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range c {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}

// With source-selection port-sum, xtrA spreads flows to site B over its
// two RLOC interfaces by the port sum, although site B has one RLOC and
// the route to it leaves by the first: [A-MPTCP]'s multihomed data
// centre sending downloads. Two flows whose port sums differ by one
// leave by different interfaces, each delivered intact.
func TestSourceByPortSum(t *testing.T) {
	s := newSites(t, config.Dataplane{PathSelection: "port-sum", SourceSelection: "port-sum", MPTCPSubflows: "off"})
	put(t, s.dpA, "10.2.0.0/24", dataplane.Entry{Paths: twoRLOCs("192.0.2.2", "192.0.2.6").Paths[:1]})
	var used []int
	for _, port := range []uint16{40000, 40001} {
		before := s.txBytes(t)
		s.transfer(t, netip.AddrPortFrom(hostA.Addr(), port), false, 4<<20)
		after := s.txBytes(t)
		sent := [2]uint64{after[0] - before[0], after[1] - before[1]}
		switch {
		case sent[0] >= 4<<20 && sent[1] < 1<<20:
			used = append(used, 0)
		case sent[1] >= 4<<20 && sent[0] < 1<<20:
			used = append(used, 1)
		default:
			t.Fatalf("from port %d: xtrA sent %d and %d bytes by its interfaces, want 4 MiB by one", port, sent[0], sent[1])
		}
	}
	if used[0] == used[1] {
		t.Errorf("flows whose port sums differ by one both left by interface %d", used[0])
	}
	if c := counters(t, s.dpA); c["itr_source_by_port_sum"] == 0 || c["itr_no_route"] != 0 {
		t.Errorf("xtrA %v", nonZero(c))
	}
}

// txBytes are the bytes xtrA's RLOC interfaces sent.
func (s *sites) txBytes(t *testing.T) [2]uint64 {
	t.Helper()
	var out [2]uint64
	for i, name := range s.rlocA {
		out[i] = linkStats(t, s.xtrA, name).TxBytes
	}
	return out
}

// linkStats are the counters of an interface of a node.
func linkStats(t *testing.T, nd *testnet.Node, name string) *netlink.LinkStatistics {
	t.Helper()
	l, err := nd.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics
}
