package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/tcpinfo"
	"github.com/amptcp/amptcp/internal/testnet"
)

// tunnelNet is two LISP sites whose xTRs are joined by two underlay
// links, each xTR with an RLOC on each:
//
//	hostA 10.1.0.1 -- xtrA ==(192.0.2.0/30, 192.0.2.4/30)== xtrB -- hostB 10.2.0.1
//
// lispd runs on each xTR with the real data plane; xtrA's is also the
// map-server and map-resolver.
type tunnelNet struct {
	hostA, xtrA, xtrB, hostB *testnet.Node
	siteA, a1, a2, siteB     *testnet.Link
}

func newTunnelNet(t *testing.T) *tunnelNet {
	n := testnet.New(t)
	s := &tunnelNet{hostA: n.Node("hosta"), xtrA: n.Node("xtra"), xtrB: n.Node("xtrb"), hostB: n.Node("hostb")}
	s.siteA = n.Link(s.hostA, s.xtrA, "10.1.0.1/24", "10.1.0.254/24")
	s.a1 = n.Link(s.xtrA, s.xtrB, "192.0.2.1/30", "192.0.2.2/30")
	s.a2 = n.Link(s.xtrA, s.xtrB, "192.0.2.5/30", "192.0.2.6/30")
	s.siteB = n.Link(s.xtrB, s.hostB, "10.2.0.254/24", "10.2.0.1/24")
	s.hostA.AddRoute("default", "10.1.0.254")
	s.hostB.AddRoute("default", "10.2.0.254")
	s.xtrA.EnableForwarding()
	s.xtrB.EnableForwarding()
	return s
}

const tunnelKey = "tunnel secret"

// xtrLispdConfig is the configuration of an xTR's lispd: its site's
// prefix through both its RLOCs, registered with 192.0.2.1 without
// asking for proxy replies (so that the map-resolver forwards requests to
// it), RLOC probing every 200ms. extra adds roles' sections.
func xtrLispdConfig(sock, roles, eidIface, rloc1, rloc2, prefix, rloc1Addr, rloc2Addr, extra string) string {
	return fmt.Sprintf(`
roles: [%s]
listen: ["0.0.0.0"]
log: {level: debug}
control: {socket: %s}
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s, %s]}
map-cache: {map-resolvers: [192.0.2.1], probe-interval: 200ms, probe-misses: 3}
xtr:
  database-mappings:
    - eid-prefix: %s
      locators:
        - {address: %s, priority: 1, weight: 50}
        - {address: %s, priority: 1, weight: 50}
  map-servers: [{address: 192.0.2.1, secret: %q}]
%s`, roles, sock, eidIface, rloc1, rloc2, prefix, rloc1Addr, rloc2Addr, tunnelKey, extra)
}

// startTunnelLispd runs lispd with cfg in nd and waits for its control
// socket.
func startTunnelLispd(t testing.TB, nd *testnet.Node, name, cfg string) string {
	t.Helper()
	return runLispd(t, nd, name, cfg).sock
}

// lispd is a lispd a test started: its process, configuration file and
// control socket.
type lispd struct {
	nd     *testnet.Node
	name   string
	proc   *testnet.Process
	config string
	sock   string
}

// runLispd runs lispd with cfg ("{sock}" stands for its control socket)
// in nd and waits for its control socket.
func runLispd(t testing.TB, nd *testnet.Node, name, cfg string) *lispd {
	t.Helper()
	dir := t.TempDir()
	l := &lispd{nd: nd, name: name, sock: filepath.Join(dir, name+".sock"), config: filepath.Join(dir, name+".yaml")}
	if err := os.WriteFile(l.config, []byte(strings.ReplaceAll(cfg, "{sock}", l.sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start(t)
	return l
}

// start runs the lispd (again) and waits for its control socket.
func (l *lispd) start(t testing.TB) {
	t.Helper()
	l.proc = l.nd.Start(t, filepath.Join(bin, "lispd"), "-config", l.config)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := daemon.QueryStatus(l.sock); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lispd %s did not start:\n%s", l.name, l.proc.Output())
		}
	}
}

func tunnelStatus(t *testing.T, sock string) *daemon.Status {
	t.Helper()
	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// transferTCP sends n random bytes from hostA to a server on hostB that
// hashes them, and checks the hash. The first SYN finds no mapping: the
// ITR drops it and resolves, and TCP's retransmission gets through.
func (s *tunnelNet) transferTCP(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sendHashed(ctx, s.hostA, s.hostB, &net.Dialer{}, "10.2.0.1", n); err != nil {
		t.Fatal(err)
	}
}

// TestTunnelRouters runs lispd's xtr role with the eBPF data plane: TCP
// between two sites crosses the overlay on mappings that only the control
// plane installed (a miss, a Map-Request forwarded to the other xTR, its
// Map-Reply), and when an underlay link fails, RLOC probing takes its
// path down and the traffic moves to the other.
func TestTunnelRouters(t *testing.T) {
	s := newTunnelNet(t)
	sockA := startTunnelLispd(t, s.xtrA, "xtra", xtrLispdConfig("{sock}", "map-server, map-resolver, xtr",
		s.siteA.Iface(s.xtrA), s.a1.Iface(s.xtrA), s.a2.Iface(s.xtrA), "10.1.0.0/24", "192.0.2.1", "192.0.2.5", `
metrics: {listen: "127.0.0.1:9342"}
map-server:
  sites:
    - {name: a, keys: [{id: 0, secret: "`+tunnelKey+`"}], eid-prefixes: [{prefix: 10.1.0.0/24}]}
    - {name: b, keys: [{id: 0, secret: "`+tunnelKey+`"}], eid-prefixes: [{prefix: 10.2.0.0/24}]}
`))
	sockB := startTunnelLispd(t, s.xtrB, "xtrb", xtrLispdConfig("{sock}", "xtr",
		s.siteB.Iface(s.xtrB), s.a1.Iface(s.xtrB), s.a2.Iface(s.xtrB), "10.2.0.0/24", "192.0.2.2", "192.0.2.6", ""))
	waitFor(t, "both xTRs registered", func() bool {
		a, b := tunnelStatus(t, sockA), tunnelStatus(t, sockB)
		return a.XTR.MapServers[0].State == "registered" && b.XTR.MapServers[0].State == "registered"
	})

	t.Run("TCP on resolved mappings", func(t *testing.T) {
		s.transferTCP(t, 4<<20)
		a := tunnelStatus(t, sockA)
		var entry string
		for _, e := range a.MapCache {
			if e.EIDPrefix == "10.2.0.0/24" {
				entry = fmt.Sprintf("%s from %s, %d paths", e.Action, e.Source, len(e.Paths))
			}
		}
		// The map-resolver forwarded the request; xtrB answered it.
		if entry != "encapsulate from 192.0.2.2:4342, 2 paths" {
			t.Errorf("xtrA's entry for site b: %q\n%+v", entry, a.MapCache)
		}
		if a.Counters.Forwarded == 0 || a.Dataplane.Counters["itr_encapsulated"] == 0 || a.Dataplane.Counters["etr_decapsulated"] == 0 {
			t.Errorf("xtrA: forwarded %d, data plane %v", a.Counters.Forwarded, a.Dataplane)
		}
		if b := tunnelStatus(t, sockB); b.Counters.Tunnel.RequestsAnswered["answered"] == 0 {
			t.Errorf("xtrB answered no Map-Request: %+v", b.Counters.Tunnel)
		}
	})

	t.Run("a failed link's path goes down and traffic moves", func(t *testing.T) {
		waitFor(t, "both of site b's RLOCs to answer probes", func() bool {
			p := tunnelStatus(t, sockA).Probes
			return len(p) == 2 && p[0].Answered > 0 && p[1].Answered > 0
		})
		if err := s.a2.SetDown(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "192.0.2.6 to go down", func() bool {
			for _, e := range tunnelStatus(t, sockA).MapCache {
				if e.EIDPrefix == "10.2.0.0/24" {
					return e.Paths[0].Up && !e.Paths[1].Up
				}
			}
			return false
		})
		before := tunnelStatus(t, sockA).Dataplane.Counters
		s.transferTCP(t, 4<<20)
		after := tunnelStatus(t, sockA).Dataplane.Counters
		if moved, stuck := after["itr_path0_bytes"]-before["itr_path0_bytes"], after["itr_path1_bytes"]-before["itr_path1_bytes"]; moved < 4<<20 || stuck != 0 {
			t.Errorf("with 192.0.2.6 down: %d bytes on path 0, %d on path 1", moved, stuck)
		}
		if err := s.a2.SetUp(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "192.0.2.6 to come back", func() bool {
			for _, e := range tunnelStatus(t, sockA).MapCache {
				if e.EIDPrefix == "10.2.0.0/24" {
					return e.Paths[0].Up && e.Paths[1].Up
				}
			}
			return false
		})
	})

	t.Run("lispd status and metrics", func(t *testing.T) {
		out, err := s.xtrA.Exec(t, filepath.Join(bin, "lispd"), "status", "-socket", sockA)
		if err != nil {
			t.Fatalf("lispd status: %v\n%s", err, out)
		}
		for _, want := range []string{"map-server 192.0.2.1:4342  registered", "10.2.0.0/24  encapsulate, from 192.0.2.2:4342",
			"path 1  up  priority/weight 1/50  192.0.2.6", "RLOC probes", "data plane:"} {
			if !strings.Contains(out, want) {
				t.Errorf("lispd status lacks %q:\n%s", want, out)
			}
		}
		m := scrape(t, s.xtrA)
		for _, metric := range []string{`lispd_locator_up{locator="192.0.2.6"}`, `lispd_xtr_map_notifies_total{result="accepted"}`,
			`lispd_dataplane_packets_total{counter="itr_encapsulated"}`, `lispd_map_cache_records_total{result="installed"}`} {
			if m[metric] < 1 {
				t.Errorf("%s = %v", metric, m[metric])
			}
		}
	})
}

// TestRTROnExplicitLocatorPath runs the rtr role with the eBPF data plane:
// site b registers an ELP through the RTR, so xtrA encapsulates to the RTR,
// whose data plane misses on the inner destination; its lispd resolves it
// and the RTR re-encapsulates to xtrB. The way back is a plain RLOC,
// routed through the RTR's node as any IP packet. The first connection
// meets a miss at every router on its way (xtrA and the RTR for its SYN,
// xtrB for the SYN-ACK): each holds the packet until its mapping is in,
// and the connection opens without a retransmission.
//
//	hostA 10.1.0.1 -- xtrA 192.0.2.1 -- 192.0.2.2 rtr 192.0.2.5 -- 192.0.2.6 xtrB -- hostB 10.2.0.1
func TestRTROnExplicitLocatorPath(t *testing.T) {
	n := testnet.New(t)
	s := &tunnelNet{hostA: n.Node("hosta"), xtrA: n.Node("xtra"), xtrB: n.Node("xtrb"), hostB: n.Node("hostb")}
	rtr := n.Node("rtr")
	s.siteA = n.Link(s.hostA, s.xtrA, "10.1.0.1/24", "10.1.0.254/24")
	l1 := n.Link(s.xtrA, rtr, "192.0.2.1/30", "192.0.2.2/30")
	l2 := n.Link(rtr, s.xtrB, "192.0.2.5/30", "192.0.2.6/30")
	s.siteB = n.Link(s.xtrB, s.hostB, "10.2.0.254/24", "10.2.0.1/24")
	s.hostA.AddRoute("default", "10.1.0.254")
	s.hostB.AddRoute("default", "10.2.0.254")
	s.xtrA.AddRoute("192.0.2.4/30", "192.0.2.2")
	s.xtrB.AddRoute("192.0.2.0/30", "192.0.2.5")
	for _, nd := range []*testnet.Node{s.xtrA, rtr, s.xtrB} {
		nd.EnableForwarding()
	}
	site := func(roles, eidIface, rlocIface, prefix, locator, extra string) string {
		return fmt.Sprintf(`
roles: [%s]
listen: ["0.0.0.0"]
log: {level: debug}
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s]}
map-cache: {map-resolvers: [192.0.2.1], probe-interval: 200ms}
xtr:
  database-mappings: [{eid-prefix: %s, locators: [%s]}]
  map-servers: [{address: 192.0.2.1, secret: %q}]
%s`, roles, eidIface, rlocIface, prefix, locator, tunnelKey, extra)
	}
	sockA := startTunnelLispd(t, s.xtrA, "xtra", site("map-server, map-resolver, xtr", s.siteA.Iface(s.xtrA), l1.Iface(s.xtrA),
		"10.1.0.0/24", "{address: 192.0.2.1, priority: 1, weight: 100}", `
map-server:
  sites:
    - {name: a, keys: [{id: 0, secret: "`+tunnelKey+`"}], eid-prefixes: [{prefix: 10.1.0.0/24}]}
    - {name: b, keys: [{id: 0, secret: "`+tunnelKey+`"}], eid-prefixes: [{prefix: 10.2.0.0/24}]}
`))
	sockB := startTunnelLispd(t, s.xtrB, "xtrb", site("xtr", s.siteB.Iface(s.xtrB), l2.Iface(s.xtrB),
		"10.2.0.0/24", "{elp: [{address: 192.0.2.2, probe: true}, 192.0.2.6], priority: 1, weight: 100}", ""))
	sockR := startTunnelLispd(t, rtr, "rtr", fmt.Sprintf(`
roles: [rtr]
listen: ["0.0.0.0"]
log: {level: debug}
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [%s, %s]}
map-cache: {map-resolvers: [192.0.2.1], probe-interval: 0s}
`, l1.Iface(rtr), l2.Iface(rtr)))
	waitFor(t, "both xTRs registered", func() bool {
		a, b := tunnelStatus(t, sockA), tunnelStatus(t, sockB)
		return a.XTR.MapServers[0].State == "registered" && b.XTR.MapServers[0].State == "registered"
	})

	if n := firstConnection(t, s.hostA, s.hostB, "10.2.0.1"); n != 0 {
		t.Errorf("the first connection retransmitted %d segments", n)
	}
	for name, held := range map[string]string{sockA: "itr_held", sockR: "rtr_held", sockB: "itr_held"} {
		if c := tunnelStatus(t, name).Dataplane.Counters; c[held] == 0 {
			t.Errorf("%s: %s = 0: %v", name, held, c)
		}
	}
	s.transferTCP(t, 4<<20)

	a, r := tunnelStatus(t, sockA), tunnelStatus(t, sockR)
	var entryA, entryR string
	for _, e := range a.MapCache {
		if e.EIDPrefix == "10.2.0.0/24" && len(e.Paths) == 1 {
			entryA = fmt.Sprintf("%s %s -> %s", e.Action, e.Paths[0].Hops[0].Address, e.Paths[0].Hops[1].Address)
		}
	}
	for _, e := range r.MapCache {
		if e.EIDPrefix == "10.2.0.0/24" {
			entryR = e.Action
		}
	}
	if entryA != "encapsulate 192.0.2.2 -> 192.0.2.6" || entryR != "encapsulate" {
		t.Errorf("site b's entry at xtrA %q, at the RTR %q", entryA, entryR)
	}
	if c := r.Dataplane.Counters; c["rtr_reencapsulated"] == 0 || c["rtr_miss"] == 0 {
		t.Errorf("RTR data plane: %v", r.Dataplane)
	}
	if c := r.Counters.Tunnel; c.Misses == 0 || c.MapReplyRecords["installed"] == 0 {
		t.Errorf("RTR control plane: %+v", c)
	}
	// xtrA probes the RTR, a hop of the ELP, and xtrB, its end; the RTR
	// answers for an EID not its own. The transfer may end before the
	// first probe: the first packets are held, not retransmitted.
	waitFor(t, "xtrA's probes of the ELP's hops", func() bool {
		p := tunnelStatus(t, sockA).Probes
		return len(p) == 2 && p[0].Address == "192.0.2.2" && p[0].Up && p[0].Answered > 0 && p[1].Answered > 0
	})
	if c := tunnelStatus(t, sockR).Counters.Tunnel; c.RequestsAnswered["probe-other-eid"] == 0 {
		t.Errorf("RTR control plane: %+v", c)
	}
}

// firstConnection opens a TCP connection from a node to a server on
// another and returns how many segments (SYNs) it retransmitted before
// it was established.
func firstConnection(t *testing.T, from, to *testnet.Node, server string) uint32 {
	t.Helper()
	ln, err := to.Listen("tcp", net.JoinHostPort(server, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := from.Dial(ctx, &net.Dialer{}, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := tcpinfo.Retransmits(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
