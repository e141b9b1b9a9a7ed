package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/pm"
)

// startPM runs `amptcp pm` with cfg ("{sock}" stands for its control
// socket) in nd and waits for its control socket.
func startPM(t testing.TB, nd *testnet.Node, name, cfg string) (*testnet.Process, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, name+".sock")
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(cfg, "{sock}", sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := nd.Start(t, filepath.Join(bin, "amptcp"), "pm", "-config", path)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := pm.QueryStatus(sock); err == nil {
			return p, sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("amptcp pm %s did not start:\n%s", name, p.Output())
		}
	}
}

func pmStatus(t testing.TB, sock string) *pm.Status {
	t.Helper()
	st, err := pm.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// connOf is the status of the connection whose first subflow is local
// to remote, or nil.
func connOf(st *pm.Status, local, remote netip.AddrPort) *pm.ConnStatus {
	for i, c := range st.Connections {
		if c.Local == local && c.Remote == remote {
			return &st.Connections[i]
		}
	}
	return nil
}

// upSubflows are the connection's subflows that are established.
func upSubflows(c *pm.ConnStatus) []pm.SubflowStatus {
	var up []pm.SubflowStatus
	if c != nil {
		for _, sf := range c.Subflows {
			if sf.State == "up" {
				up = append(up, sf)
			}
		}
	}
	return up
}

// ssPorts are the local ports of the TCP sockets (MPTCP subflows
// included) established in nd toward remote, as `ss` lists them.
func ssPorts(t *testing.T, nd *testnet.Node, remote netip.AddrPort) []uint16 {
	t.Helper()
	out, err := nd.Exec(t, "ss", "-Htn", "state", "established", "dst", remote.String())
	if err != nil {
		t.Fatalf("ss: %v %s", err, out)
	}
	var ports []uint16
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		// A subflow bound to a device shows as address%device:port.
		local := f[2]
		if i, j := strings.IndexByte(local, '%'), strings.LastIndexByte(local, ':'); i > 0 && j > i {
			local = local[:i] + local[j:]
		}
		if ap, err := netip.ParseAddrPort(local); err == nil {
			ports = append(ports, ap.Port())
		}
	}
	slices.Sort(ports)
	return ports
}

func mptcpLimits(t testing.TB, subflows int, nodes ...*testnet.Node) {
	t.Helper()
	n := strconv.Itoa(subflows)
	for _, nd := range nodes {
		if out, err := nd.Exec(t, "ip", "mptcp", "limits", "set", "subflows", n, "add_addr_accepted", n); err != nil {
			t.Fatalf("ip mptcp limits in %s: %v %s", nd.Name(), err, out)
		}
	}
}

// TestPathManagerOnOverlay is [A-MPTCP] on the LISP-TE overlay of
// [LISP-TE]: hostA's `amptcp pm` asks the mapping system about hostB's
// EID, learns two ELPs, opens one more subflow with a source port whose
// port sum puts it on the other ELP at xtrA (port-sum path selection),
// and each RTR carries one subflow's bytes.
func TestPathManagerOnOverlay(t *testing.T) {
	o := newOverlay(t, "path-selection: port-sum, mptcp-subflows: off")
	mptcpLimits(t, 4, o.hostA, o.hostB)
	// Resolve what the test reaches: hostB's site, for the data, and the
	// map-resolver's address, which xtrA forwards natively once the
	// mapping system has said it is no EID.
	if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 4); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		out, err := o.hostA.Exec(t, filepath.Join(bin, "amptcp"), "lig", "-m", "10.0.100.2", "-c", "1", "-t", "300ms", "-i", "1000", "10.2.0.1")
		if err == nil {
			break
		}
		if try == 20 {
			a := tunnelStatus(t, o.sockA)
			t.Fatalf("hostA cannot reach the map-resolver: %v %s\nxtrA's map-cache %+v\ncounters %v", err, out, a.MapCache, a.Dataplane.Counters)
		}
	}

	_, sockB := startPM(t, o.hostB, "pmb", `
policy: default
control: {socket: "{sock}"}
`)
	_, sockA := startPM(t, o.hostA, "pma", `
policy: amptcp
amptcp: {map-resolver: 10.0.100.2, instance-id: 1000, equation: 2}
long-lived: {whitelist: [{prefix: 10.2.0.0/24}]}
control: {socket: "{sock}"}
`)
	r1, r2 := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.1.0.1")}}
	d.SetMultipathTCP(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := startStream(ctx, o.hostA, o.hostB, d, "10.2.0.1", 256<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c *pm.ConnStatus
	waitFor(t, "hostA's pm to open the planned subflows", func() bool {
		c = connOf(pmStatus(t, sockA), s.Local(), s.Remote())
		return c != nil && c.Plan != nil && len(upSubflows(c)) == c.Plan.N
	})
	p := c.Plan
	t.Logf("plan: %s, %d subflows, P %d", p.Why, p.N, p.P)
	if p.Policy != pm.PolicyAMPTCP || p.Fallback != "" || p.N != 2 || p.Remote == nil || p.Remote.Paths() != 2 {
		t.Fatalf("plan %+v, remote mapping %+v", p, p.Remote)
	}
	paths := map[int]bool{}
	var ports []uint16
	for _, sf := range c.Subflows {
		paths[sf.Path] = true
		ports = append(ports, sf.Local.Port())
		if sum := (int(sf.Local.Port()) + int(sf.Remote.Port())) % p.PathsOut; sum != sf.Path {
			t.Errorf("subflow %s → %s on path %d, its port sum says %d", sf.Local, sf.Remote, sf.Path, sum)
		}
	}
	if len(paths) != 2 {
		t.Errorf("subflows on paths %v, want both ELPs", paths)
	}
	slices.Sort(ports)
	if got := ssPorts(t, o.hostA, s.Remote()); !slices.Equal(got, ports) {
		t.Errorf("ss lists subflows from ports %v, the pm %v", got, ports)
	}
	// The server's pm sees the connection from the other end, with the
	// client's subflows, and plans nothing.
	if b := pmStatus(t, sockB); len(b.Connections) != 1 || !b.Connections[0].Server || b.Connections[0].Plan != nil ||
		len(upSubflows(&b.Connections[0])) != 2 {
		t.Errorf("hostB's pm: %+v", b.Connections)
	}

	// As fast as the overlay goes, both subflows carry data: each ELP's
	// RTR a megabyte or more, however long a busy machine takes.
	var on1, on2 uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r1After, r2After := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
		on1, on2 = r1After["rtr_path0_bytes"]-r1["rtr_path0_bytes"], r2After["rtr_path1_bytes"]-r2["rtr_path1_bytes"]
		if on1 >= 1<<20 && on2 >= 1<<20 || time.Now().After(deadline) {
			break
		}
	}
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rtr1 carried %d bytes, rtr2 %d bytes, of %d", on1, on2, s.received.Load())
	if on1 < 1<<20 || on2 < 1<<20 {
		t.Errorf("each ELP's RTR should carry a subflow: rtr1 %d bytes, rtr2 %d bytes", on1, on2)
	}

	// A second connection to the same EID is planned from the cache.
	before := pmStatus(t, sockA).Counters
	if err := sendHashed(ctx, o.hostA, o.hostB, d, "10.2.0.1", 1<<20); err != nil {
		t.Fatal(err)
	}
	after := pmStatus(t, sockA).Counters
	if after.Lookups["cached"] <= before.Lookups["cached"] || after.Plans["amptcp"] != before.Plans["amptcp"]+1 {
		t.Errorf("the second connection: lookups %v → %v, plans %v → %v", before.Lookups, after.Lookups, before.Plans, after.Plans)
	}
}

// twoPaths is a client with two links to a router that leads to a
// server, the second link used by the client's second address (source
// routing), without LISP:
//
//	       10.1.1.0/24
//	client ----------- r ---------- server
//	       ----------- 10.2.0.0/24  10.2.0.2
//	       10.1.2.0/24
type twoPaths struct {
	client, r, server *testnet.Node
	link1, link2      *testnet.Link
}

func newTwoPaths(t *testing.T) *twoPaths {
	n := testnet.New(t)
	tp := &twoPaths{client: n.Node("client"), r: n.Node("r"), server: n.Node("server")}
	tp.link1 = n.Link(tp.client, tp.r, "10.1.1.2/24", "10.1.1.1/24")
	tp.link2 = n.Link(tp.client, tp.r, "10.1.2.2/24", "10.1.2.1/24")
	n.Link(tp.r, tp.server, "10.2.0.1/24", "10.2.0.2/24")
	tp.client.AddRoute("default", "10.1.1.1")
	tp.server.AddRoute("default", "10.2.0.1")
	tp.r.EnableForwarding()
	if out, err := tp.client.Exec(t, "ip", "rule", "add", "from", "10.1.2.2", "lookup", "102"); err != nil {
		t.Fatalf("ip rule: %v %s", err, out)
	}
	tp.routeSecond(t)
	mptcpLimits(t, 4, tp.client, tp.server)
	return tp
}

// routeSecond routes what the client sends from its second address over
// the second link (again: the route goes with the link when it goes
// down).
func (tp *twoPaths) routeSecond(t *testing.T) {
	if out, err := tp.client.Exec(t, "ip", "route", "replace", "default", "via", "10.1.2.1", "table", "102"); err != nil {
		t.Fatalf("ip route: %v %s", err, out)
	}
}

// txBytes is what the client sent on a link.
func txBytes(t *testing.T, nd *testnet.Node, l *testnet.Link) uint64 {
	link, err := nd.Netlink().LinkByName(l.Iface(nd))
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Statistics.TxBytes
}

// outage takes the second link down for a while with a stream running and
// returns how long after it came back the stream's bytes flowed on it
// again (at least 256 KB more sent on it), or an error after 15 s: ten
// times what the kernel's own path manager takes, whose retransmission
// timer backs off through the outage. How soon amptcp pm repairs is
// `amptcp bench pm`'s measurement.
func (tp *twoPaths) outage(t *testing.T, down time.Duration) (time.Duration, error) {
	if err := tp.link2.SetDown(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down)
	back := time.Now()
	if err := tp.link2.SetUp(); err != nil {
		t.Fatal(err)
	}
	tp.routeSecond(t)
	base := txBytes(t, tp.client, tp.link2)
	for time.Since(back) < 15*time.Second {
		if txBytes(t, tp.client, tp.link2) > base+256<<10 {
			return time.Since(back), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("no traffic on the second link %v after it came back", time.Since(back))
}

// TestPathManagerRepair fails the second path of a two-subflow
// connection and brings it back: `amptcp pm` (fullmesh) creates the
// subflow again and it carries bytes. A restart of the pm leaves the
// connection alone, and the new pm adopts it; on exit the pm gives the
// namespace back to the kernel's path manager.
func TestPathManagerRepair(t *testing.T) {
	tp := newTwoPaths(t)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.1.1.2")}}
	d.SetMultipathTCP(true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const pmConfig = `
policy: fullmesh
repair: {interval: 200ms, stall-time: 300ms}
control: {socket: "{sock}"}
`
	proc, sock := startPM(t, tp.client, "pm", pmConfig)
	s, err := startStream(ctx, tp.client, tp.server, d, "10.2.0.2", 256<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two subflows", func() bool {
		return len(upSubflows(connOf(pmStatus(t, sock), s.Local(), s.Remote()))) == 2
	})
	took, err := tp.outage(t, 2*time.Second)
	if err != nil {
		t.Fatalf("%v\npm: %+v", err, connOf(pmStatus(t, sock), s.Local(), s.Remote()))
	}
	t.Logf("with amptcp pm, bytes flow on the second path %v after it came back", took)
	c := connOf(pmStatus(t, sock), s.Local(), s.Remote())
	repairs := 0
	for _, sf := range c.Subflows {
		repairs += sf.Repairs
	}
	if repairs == 0 || len(c.Subflows) != 2 {
		t.Errorf("subflows after the outage: %+v", c.Subflows)
	}

	// A restart: the connection goes on, and the new pm adopts it with
	// its subflows.
	if err := proc.Stop(); err != nil {
		t.Errorf("amptcp pm exited with %v:\n%s", err, proc.Output())
	}
	received := s.received.Load()
	waitFor(t, "the stream to go on without the pm", func() bool { return s.received.Load() > received+1<<20 })
	if got := ssPorts(t, tp.client, s.Remote()); len(got) != 2 {
		t.Errorf("subflows without the pm: ports %v", got)
	}
	proc, sock = startPM(t, tp.client, "pm2", pmConfig)
	waitFor(t, "the new pm to adopt the connection", func() bool {
		return len(upSubflows(connOf(pmStatus(t, sock), s.Local(), s.Remote()))) == 2
	})
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if err := proc.Stop(); err != nil {
		t.Errorf("amptcp pm exited with %v:\n%s", err, proc.Output())
	}
	if out, _ := tp.client.Exec(t, "sysctl", "-n", "net.mptcp.path_manager"); strings.TrimSpace(out) != "kernel" {
		t.Errorf("path manager after the pm: %q", out)
	}
}
