package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
)

// overlay is the LISP-TE overlay of [LISP-TE]: two sites whose xTRs are
// joined by two Explicit Locator Paths, each through an RTR of its own,
// and a map-server/map-resolver of its own; every router runs lispd, in
// instance 1000.
//
//	                 10.0.11.0/24  rtr1  10.0.21.0/24
//	hostA -- xtrA ----------------(    )---------------- xtrB -- hostB
//	10.1.0.1   |  ----------------(    )----------------         10.2.0.1
//	10.1.0.2   |     10.0.12.0/24  rtr2  10.0.22.0/24
//	           ms 10.0.100.2
//
// Site b registers the ELPs (rtr1, xtrB) and (rtr2, xtrB), site a their
// mirror images; xtrA asks the map-server to answer for it (proxy), xtrB
// answers forwarded Map-Requests itself.
type overlay struct {
	hostA, xtrA, rtr1, rtr2, xtrB, hostB, ms *testnet.Node
	aR1, aR2, r1B, r2B, siteA, siteB, msLink *testnet.Link
	sockA, sockB, sockR1, sockR2, sockMS     string
	lispds                                   map[string]*lispd // the tunnel routers', by node name
}

const overlayKey = "overlay secret"

// steering, if not empty, is added to the xTRs' dataplane settings (e.g.
// "path-selection: port-sum").
func newOverlay(t *testing.T, steering string) *overlay {
	return buildOverlay(t, overlayOptions{steering: steering})
}

// overlayOptions change the tunnel routers' data plane settings: steering
// those of both xTRs, dataplane those of one router, by node name;
// stateful has both xTRs bind subflows statefully, each answering its
// own Map-Requests.
type overlayOptions struct {
	steering  string
	dataplane map[string]string
	stateful  bool
}

func buildOverlay(t *testing.T, opts overlayOptions) *overlay {
	steering := ""
	if opts.steering != "" {
		steering = ", " + opts.steering
	}
	if opts.stateful {
		steering += ", mptcp-subflows: bind-stateful"
	}
	extra := func(name string) string {
		if s := opts.dataplane[name]; s != "" {
			return ", " + s
		}
		return ""
	}
	n := testnet.New(t)
	o := &overlay{hostA: n.Node("hosta"), xtrA: n.Node("xtra"), rtr1: n.Node("rtr1"), rtr2: n.Node("rtr2"),
		xtrB: n.Node("xtrb"), hostB: n.Node("hostb"), ms: n.Node("ms")}
	siteA := n.Link(o.hostA, o.xtrA, "10.1.0.1/24,10.1.0.2/24", "10.1.0.254/24")
	o.siteA = siteA
	o.msLink = n.Link(o.xtrA, o.ms, "10.0.100.1/24", "10.0.100.2/24")
	o.aR1 = n.Link(o.xtrA, o.rtr1, "10.0.11.1/24", "10.0.11.2/24")
	o.aR2 = n.Link(o.xtrA, o.rtr2, "10.0.12.1/24", "10.0.12.2/24")
	o.r1B = n.Link(o.rtr1, o.xtrB, "10.0.21.1/24", "10.0.21.2/24")
	o.r2B = n.Link(o.rtr2, o.xtrB, "10.0.22.1/24", "10.0.22.2/24")
	siteB := n.Link(o.xtrB, o.hostB, "10.2.0.254/24", "10.2.0.1/24")
	o.siteB = siteB
	names := map[*testnet.Node]string{o.xtrA: "xtra", o.xtrB: "xtrb", o.rtr1: "rtr1", o.rtr2: "rtr2"}
	o.hostA.AddRoute("default", "10.1.0.254")
	o.hostB.AddRoute("default", "10.2.0.254")
	o.ms.AddRoute("default", "10.0.100.1")
	o.xtrA.AddRoute("10.0.21.0/24", "10.0.11.2")
	o.xtrA.AddRoute("10.0.22.0/24", "10.0.12.2")
	o.rtr1.AddRoute("default", "10.0.11.1")
	o.rtr2.AddRoute("default", "10.0.12.1")
	o.xtrB.AddRoute("default", "10.0.21.1")
	o.xtrB.AddRoute("10.0.12.0/24", "10.0.22.1")
	for _, nd := range []*testnet.Node{o.xtrA, o.rtr1, o.rtr2, o.xtrB, o.ms} {
		nd.EnableForwarding()
		// Packets of one flow come back by the other ELP than they left.
		nd.SetSysctl("net.ipv4.conf.all.rp_filter", "0")
		nd.SetSysctl("net.ipv4.conf.default.rp_filter", "0")
	}

	o.sockMS = startTunnelLispd(t, o.ms, "ms", `
roles: [map-server, map-resolver]
listen: ["10.0.100.2"]
control: {socket: "{sock}"}
map-server:
  sites:
    - {name: a, keys: [{id: 1, secret: "`+overlayKey+`"}], eid-prefixes: [{prefix: 10.1.0.0/24, instance-id: 1000}]}
    - {name: b, keys: [{id: 1, secret: "`+overlayKey+`"}], eid-prefixes: [{prefix: 10.2.0.0/24, instance-id: 1000}]}
`)
	xtr := func(eid, r1, r2 *testnet.Link, nd *testnet.Node, prefix, elp1, elp2 string, proxy bool) string {
		return fmt.Sprintf(`
roles: [xtr]
listen: ["0.0.0.0"]
control: {socket: "{sock}"}
metrics: {listen: "127.0.0.1:9342"}
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s, %s], instance-id: 1000%s%s}
map-cache: {map-resolvers: [10.0.100.2], probe-interval: 200ms, probe-misses: 3}
xtr:
  database-mappings:
    - eid-prefix: %s
      ttl: 5m
      locators:
        - {elp: [%s], priority: 1, weight: 50}
        - {elp: [%s], priority: 1, weight: 50}
  map-servers: [{address: 10.0.100.2, key-id: 1, secret: %q, proxy-reply: %v}]
`, eid.Iface(nd), r1.Iface(nd), r2.Iface(nd), steering, extra(names[nd]), prefix, elp1, elp2, overlayKey, proxy)
	}
	o.lispds = map[string]*lispd{}
	start := func(nd *testnet.Node, name, cfg string) string {
		o.lispds[name] = runLispd(t, nd, name, cfg)
		return o.lispds[name].sock
	}
	o.sockA = start(o.xtrA, "xtra", xtr(siteA, o.aR1, o.aR2, o.xtrA, "10.1.0.0/24",
		"10.0.21.1, 10.0.11.1", "10.0.22.1, 10.0.12.1", !opts.stateful))
	o.sockB = start(o.xtrB, "xtrb", xtr(siteB, o.r1B, o.r2B, o.xtrB, "10.2.0.0/24",
		"10.0.11.2, 10.0.21.2", "10.0.12.2, 10.0.22.2", false))
	rtr := func(nd *testnet.Node, a, b *testnet.Link) string {
		return fmt.Sprintf(`
roles: [rtr]
listen: ["0.0.0.0"]
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [%s, %s]%s}
map-cache: {map-resolvers: [10.0.100.2], probe-interval: 0s}
`, a.Iface(nd), b.Iface(nd), extra(names[nd]))
	}
	o.sockR1 = start(o.rtr1, "rtr1", rtr(o.rtr1, o.aR1, o.r1B))
	o.sockR2 = start(o.rtr2, "rtr2", rtr(o.rtr2, o.aR2, o.r2B))
	waitFor(t, "both xTRs registered", func() bool {
		a, b := tunnelStatus(t, o.sockA), tunnelStatus(t, o.sockB)
		return a.XTR.MapServers[0].State == "registered" && b.XTR.MapServers[0].State == "registered"
	})
	return o
}

// rtrCounters are an RTR's data plane counters.
func rtrCounters(t *testing.T, sock string) map[string]uint64 {
	t.Helper()
	st := tunnelStatus(t, sock)
	if st.Dataplane == nil || st.Dataplane.Error != "" {
		t.Fatalf("no data plane status: %+v", st.Dataplane)
	}
	return st.Dataplane.Counters
}

func entryOf(st *daemon.Status, prefix string) string {
	for _, e := range st.MapCache {
		if e.EIDPrefix == prefix {
			var paths []string
			for _, p := range e.Paths {
				var hops []string
				for _, h := range p.Hops {
					hops = append(hops, h.Address)
				}
				paths = append(paths, fmt.Sprintf("%s up=%v", strings.Join(hops, ">"), p.Up))
			}
			return fmt.Sprintf("[%d]%s %s: %s", e.InstanceID, e.EIDPrefix, e.Action, strings.Join(paths, ", "))
		}
	}
	return ""
}

// TestOverlay is the tunnel routers' evidence end to end: the first packets miss
// and are resolved; the data header carries the instance ID (tshark
// says); an MPTCP connection's two subflows each take an ELP of their own,
// through their own RTR, for their whole life, bytes intact; and when a
// link of one ELP fails, probing takes the ELP down and TCP moves to the
// other.
func TestOverlay(t *testing.T) {
	tshark := testenv.RequireTool(t, "tshark")
	o := newOverlay(t, "")

	pcap := filepath.Join(t.TempDir(), "a.pcap")
	capture := o.xtrA.Start(t, tshark, "-i", o.aR1.Iface(o.xtrA), "-i", o.aR2.Iface(o.xtrA), "-f", "udp port 4341", "-w", pcap)
	waitCapturing(t, capture)

	t.Run("the first packets miss, resolve and pass", func(t *testing.T) {
		// UDP from many ports (flows that hash to either ELP) until each
		// is echoed: the first datagrams are held while xtrA resolves
		// 10.2.0.1, the RTRs the EIDs they carry, xtrB 10.1.0.1.
		if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 16); err != nil {
			t.Fatal(err)
		}
		a := tunnelStatus(t, o.sockA)
		want := "[1000]10.2.0.0/24 encapsulate: 10.0.11.2>10.0.21.2 up=true, 10.0.12.2>10.0.22.2 up=true"
		if got := entryOf(a, "10.2.0.0/24"); got != want {
			t.Errorf("xtrA's entry:\n got %s\nwant %s", got, want)
		}
		if c := a.Dataplane.Counters; c["itr_miss_reported"] == 0 || c["itr_encapsulated"] == 0 {
			t.Errorf("xtrA's data plane: %v", c)
		}
		if c := a.Counters.Tunnel; c.MapReplyRecords["installed"] == 0 {
			t.Errorf("xtrA's map-cache: %+v", c)
		}
		// xtrB answered the Map-Request the map-server forwarded to it,
		// and both RTRs resolved what they carry.
		if b := tunnelStatus(t, o.sockB); b.Counters.Tunnel.RequestsAnswered["answered"] == 0 {
			t.Errorf("xtrB answered nothing: %+v", b.Counters.Tunnel)
		}
		for name, sock := range map[string]string{"rtr1": o.sockR1, "rtr2": o.sockR2} {
			r := tunnelStatus(t, sock)
			if entryOf(r, "10.2.0.0/24") == "" || entryOf(r, "10.1.0.0/24") == "" || r.Dataplane.Counters["rtr_miss"] == 0 {
				t.Errorf("%s: map-cache %+v, data plane %v", name, r.MapCache, r.Dataplane.Counters)
			}
		}
	})

	t.Run("tshark sees the instance ID and the path ID", func(t *testing.T) {
		time.Sleep(300 * time.Millisecond) // let tshark write the last packets
		capture.Stop()
		out, err := exec.Command(tshark, "-r", pcap, "-d", "udp.port==4341,lisp-data", "-T", "fields", "-E", "separator=|",
			"-e", "ip.dst", "-e", "lisp-data.flags.nonce", "-e", "lisp-data.flags.iid",
			"-e", "lisp-data.iid", "-e", "lisp-data.flags.lsb", "-e", "udp.payload", "-e", "udp.dstport").Output()
		if err != nil {
			t.Fatalf("tshark -r: %v", err)
		}
		seen := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// Fields of the outer and the inner headers come as
			// "outer,inner".
			f := strings.Split(line, "|")
			if len(f) != 7 || !strings.HasSuffix(f[6], ",7") {
				continue // not a datagram from hostA to the echo port
			}
			f[0], _, _ = strings.Cut(f[0], ",")
			f[5], _, _ = strings.Cut(f[5], ",")
			// Wireshark shows no LSBs while L is clear, so the path ID
			// is read from the LISP header's bytes: it names the ELP
			// whose first hop the packet goes to.
			wantPath := map[string]string{"10.0.11.2": "01", "10.0.12.2": "02"}[f[0]]
			if f[1] != "1" || f[2] != "1" || f[3] != "1000" || f[4] != "0" || len(f[5]) < 16 || f[5][14:16] != wantPath {
				t.Errorf("datagram encapsulated as %q, want nonce, I bit, IID 1000, no LSBs, path %s", line, wantPath)
			}
			seen[f[0]]++
		}
		if seen["10.0.11.2"] == 0 || seen["10.0.12.2"] == 0 {
			t.Errorf("tshark saw encapsulated datagrams to the RTRs %v:\n%s", seen, out)
		}
	})

	t.Run("MPTCP subflows each on their own ELP", func(t *testing.T) {
		for _, cmd := range [][]string{
			{"ip", "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"},
			{"ip", "mptcp", "endpoint", "add", "10.1.0.2", "subflow"},
		} {
			if out, err := o.hostA.Exec(t, cmd[0], cmd[1:]...); err != nil {
				t.Fatalf("%v: %v %s", cmd, err, out)
			}
		}
		if out, err := o.hostB.Exec(t, "ip", "mptcp", "limits", "set", "subflows", "2"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		r1, r2 := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
		transfer(t, o.hostA, o.hostB, "10.1.0.1", "10.2.0.1", true, 32<<20)

		a := tunnelStatus(t, o.sockA)
		subs := a.Dataplane.Subflows
		if len(subs) != 2 || subs[0].Connection != subs[1].Connection || subs[0].Path == subs[1].Path {
			t.Fatalf("xtrA's subflows: %+v", subs)
		}
		if c := a.Dataplane.Counters; c["subflow_join"] != 1 || c["subflow_rebound"] != 0 {
			t.Errorf("xtrA's subflow counters: %v", c)
		}
		// The RTR of each ELP carried its subflow's bytes and never a
		// packet of the other ELP.
		bytesOn := map[int]uint64{}
		for _, sf := range subs {
			bytesOn[sf.Path] = sf.Bytes
			if sf.Bytes < 1<<20 {
				t.Errorf("subflow %s carried %d bytes", sf.Local, sf.Bytes)
			}
		}
		r1After, r2After := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
		if got := r1After["rtr_path0_bytes"] - r1["rtr_path0_bytes"]; got < bytesOn[0] {
			t.Errorf("rtr1 forwarded %d bytes on ELP 1, its subflow sent %d", got, bytesOn[0])
		}
		if got := r2After["rtr_path1_bytes"] - r2["rtr_path1_bytes"]; got < bytesOn[1] {
			t.Errorf("rtr2 forwarded %d bytes on ELP 2, its subflow sent %d", got, bytesOn[1])
		}
		if r1After["rtr_path1_packets"] != 0 || r2After["rtr_path0_packets"] != 0 {
			t.Errorf("an RTR carried the other ELP: rtr1 %v, rtr2 %v", r1After, r2After)
		}
	})

	t.Run("a failed link takes its ELP down and TCP moves", func(t *testing.T) {
		if err := o.r1B.SetDown(); err != nil {
			t.Fatal(err)
		}
		// Both xTRs probe the hops of the ELPs they use: each takes its
		// ELP through rtr1 down.
		waitFor(t, "xtrA to take the ELP through rtr1 down", func() bool {
			return entryOf(tunnelStatus(t, o.sockA), "10.2.0.0/24") ==
				"[1000]10.2.0.0/24 encapsulate: 10.0.11.2>10.0.21.2 up=false, 10.0.12.2>10.0.22.2 up=true"
		})
		waitFor(t, "xtrB to take the ELP through rtr1 down", func() bool {
			return entryOf(tunnelStatus(t, o.sockB), "10.1.0.0/24") ==
				"[1000]10.1.0.0/24 encapsulate: 10.0.21.1>10.0.11.1 up=false, 10.0.22.1>10.0.12.1 up=true"
		})
		r1, r2 := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
		for i := range 4 { // flows that would hash to either ELP
			transfer(t, o.hostA, o.hostB, "10.1.0.1", "10.2.0.1", false, 1<<20+i)
		}
		r1After, r2After := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
		if moved := r2After["rtr_path1_bytes"] - r2["rtr_path1_bytes"]; moved < 4<<20 {
			t.Errorf("rtr2 re-encapsulated %d bytes of 4 MiB", moved)
		}
		if stuck := r1After["rtr_reencapsulated"] - r1["rtr_reencapsulated"]; stuck != 0 {
			t.Errorf("rtr1 still re-encapsulated %d packets", stuck)
		}
		if err := o.r1B.SetUp(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the ELP through rtr1 to come back", func() bool {
			return strings.Contains(entryOf(tunnelStatus(t, o.sockA), "10.2.0.0/24"), "10.0.21.2 up=true")
		})
	})
}

// echoFlows sends a datagram from each of n source ports of from to an
// echo server it starts on to at addr, again and again until every flow
// has its echo, for up to 15 s.
func echoFlows(from, to *testnet.Node, addr string, n int) error {
	srv, err := to.ListenUDP("udp4", addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			k, peer, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:k], peer)
		}
	}()
	dst, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for i := range n {
		c, err := from.ListenUDP("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		buf := make([]byte, 64)
		for {
			if time.Now().After(deadline) {
				return fmt.Errorf("flow %d of %d from %s got no echo", i+1, n, c.LocalAddr())
			}
			if _, err := c.WriteToUDP([]byte("ping"), dst); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := c.ReadFromUDP(buf); err == nil {
				break
			}
		}
		c.Close()
	}
	return nil
}

// transfer sends n random bytes from a host to a server on another that
// hashes them, over MPTCP or TCP, from the local address given, and
// checks the hash.
func transfer(t *testing.T, from, to *testnet.Node, local, server string, mptcp bool, n int) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	d.SetMultipathTCP(mptcp)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sendHashed(ctx, from, to, d, server, n); err != nil {
		t.Fatal(err)
	}
}
