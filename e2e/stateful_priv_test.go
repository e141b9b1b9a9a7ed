package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
)

// mptcpTwoSubflows lets hostA open a second subflow from 10.1.0.2, and
// hostB accept it.
func mptcpTwoSubflows(t *testing.T, o *overlay) {
	t.Helper()
	for _, cmd := range []struct {
		nd   *testnet.Node
		args []string
	}{
		{o.hostA, []string{"mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2"}},
		{o.hostA, []string{"mptcp", "endpoint", "add", "10.1.0.2", "subflow"}},
		{o.hostB, []string{"mptcp", "limits", "set", "subflows", "2"}},
	} {
		if out, err := cmd.nd.Exec(t, "ip", cmd.args...); err != nil {
			t.Fatalf("ip %v: %v %s", cmd.args, err, out)
		}
	}
}

// synRetransmits is how many SYNs nd's TCP sent again.
func synRetransmits(t *testing.T, nd *testnet.Node) uint64 {
	t.Helper()
	out, err := nd.Exec(t, "nstat", "-az", "TcpExtTCPSynRetrans")
	if err != nil {
		t.Fatalf("nstat: %v %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "TcpExtTCPSynRetrans" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n
		}
	}
	t.Fatalf("nstat said %q", out)
	return 0
}

// firstHop is the first hop of an ELP as lispd status writes it
// ("elp{10.0.11.2 -> 10.0.21.2}").
func firstHop(elp string) string {
	s := strings.TrimPrefix(elp, "elp{")
	s, _, _ = strings.Cut(s, " ")
	return strings.TrimRight(s, "(,)PSL}")
}

// pinnedOnDistinctPaths checks that sock's data plane has two subflows
// of one connection, each pinned to the path its ETR chose, on paths of
// their own, opened by the local host or not; it returns their paths by
// flow ("local>remote", as the ETR names the flow it bound).
func pinnedOnDistinctPaths(t *testing.T, name, sock string, initiator bool) map[string]int {
	t.Helper()
	st := tunnelStatus(t, sock)
	subs := st.Dataplane.Subflows
	if len(subs) != 2 || subs[0].Connection != subs[1].Connection || subs[0].Path == subs[1].Path {
		t.Fatalf("%s's subflows: %+v", name, subs)
	}
	paths := map[string]int{}
	for _, sf := range subs {
		if !sf.Pinned || sf.Asked || sf.Initiator != initiator {
			t.Errorf("%s: subflow %s not pinned (or initiator %v): %+v", name, sf.Local, sf.Initiator, sf)
		}
		paths[sf.Local+">"+sf.Remote] = sf.Path
	}
	if c := st.Counters.Tunnel.StatefulSubflows; c["pinned"] < 2 || c["unbound"] != 0 {
		t.Errorf("%s's stateful subflows: %v", name, c)
	}
	return paths
}

// boundOnDistinctELPs checks that the ETR of sock bound two subflows of
// one connection to ELPs of their own, and that each is the path the
// other side's data plane pinned it to (by the ELP's first hop, in
// entry, the other side's map-cache entry).
func boundOnDistinctELPs(t *testing.T, name, sock string, pinned map[string]int, entry string) {
	t.Helper()
	st := tunnelStatus(t, sock)
	bs := st.XTR.Bindings
	if len(bs) != 2 || bs[0].ELP == bs[1].ELP || !bs[0].Seen || bs[0].Connection == 0 || bs[0].Connection != bs[1].Connection {
		t.Fatalf("%s's bindings: %+v", name, bs)
	}
	paths := strings.Split(entry[strings.Index(entry, ": ")+2:], ", ")
	for _, b := range bs {
		i, ok := pinned[b.Flow]
		if !ok || i >= len(paths) || !strings.HasPrefix(paths[i], firstHop(b.ELP)+">") {
			t.Errorf("%s bound %s to %s; the data plane pinned it to path %d of %v", name, b.Flow, b.ELP, i, paths)
		}
	}
}

// flowRequests reads the stateful Map-Requests of a capture: tshark
// decodes what it can of each ECM (the LCAF types, the instance ID, the
// source EID), and the Application Data LCAF that Wireshark does not
// dissect is read byte by byte (RFC 8060 §4.3). It returns the requests'
// flows.
func flowRequests(t *testing.T, tshark, pcap string) []control.Flow {
	t.Helper()
	out, err := exec.Command(tshark, "-r", pcap, "-d", "udp.port==4342,lisp", "-Y", "lisp.type == 8", "-T", "fields", "-E", "separator=|",
		"-e", "lisp.type", "-e", "lisp.lcaf.type", "-e", "lisp.lcaf.iid", "-e", "lisp.mreq.srceid.ipv4", "-e", "udp.payload").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	var flows []control.Flow
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 || !strings.Contains(f[1], "4") {
			continue // not a stateful request
		}
		// An ECM (8) around a Map-Request (1); the EID an Instance-ID
		// LCAF (2) around an Application Data LCAF (4).
		if f[0] != "8,1" || f[1] != "2,4" || f[2] != "1000" {
			t.Errorf("tshark decodes a stateful request as types %s, LCAFs %s, instance %s", f[0], f[1], f[2])
		}
		payload, err := hex.DecodeString(strings.Split(f[4], ",")[0])
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(payload, []byte{0x40, 0x03, 0, 0, byte(lisp.LCAFAppData), 0})
		if at < 0 || len(payload) < at+26 {
			t.Fatalf("no App-Data LCAF in %x", payload)
		}
		b := payload[at:]
		field := func(off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
		if field(6) != 18 || binary.BigEndian.Uint32(b[8:])>>8 != 0 || b[11] != 6 || field(12) != field(14) ||
			field(16) != field(18) || field(20) != 1 {
			t.Errorf("App-Data LCAF %x: want length 18, TOS 0, TCP, one port each side, an IPv4 EID", b[:26])
		}
		src := netip.MustParseAddr(f[3])
		dst := netip.AddrFrom4([4]byte(b[22:26]))
		flows = append(flows, control.Flow{IID: 1000, Protocol: 6, Source: netip.AddrPortFrom(src, field(12)),
			Dest: netip.AddrPortFrom(dst, field(16))})
	}
	return flows
}

// TestStatefulBinding is [LISP-TE]'s destination-based stateful mode
// (§IV.A) with the real binaries: for each MPTCP subflow, xtrA asks xtrB
// with an Application Data Map-Request (on the wire, as tshark and the
// bytes say); xtrB binds the subflows of the connection to distinct ELPs
// and answers each with its ELP; xtrA pins each subflow there, and each
// RTR carries its subflow only; no SYN waits for it. The bindings end
// with the subflows; an RTR asking for a subflow not bound gets nothing.
func TestStatefulBinding(t *testing.T) {
	tshark := testenv.RequireTool(t, "tshark")
	testenv.RequireTool(t, "nstat")
	o := buildOverlay(t, overlayOptions{stateful: true})
	mptcpTwoSubflows(t, o)
	pcap := filepath.Join(t.TempDir(), "ms.pcap")
	msIface := o.msLink.Iface(o.ms)
	capture := o.ms.Start(t, tshark, "-i", msIface, "-f", "udp port 4342", "-w", pcap)
	waitCapturing(t, capture)

	// The map-caches learn the sites first: a miss costs the first SYN
	// of a connection whatever the binding.
	if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 16); err != nil {
		t.Fatal(err)
	}
	synBefore := synRetransmits(t, o.hostA)
	r1, r2 := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
	transfer(t, o.hostA, o.hostB, "10.1.0.1", "10.2.0.1", true, 32<<20)
	if n := synRetransmits(t, o.hostA) - synBefore; n != 0 {
		t.Errorf("%d SYNs sent again: a subflow's SYN waited for its binding", n)
	}

	pinned := pinnedOnDistinctPaths(t, "xtrA", o.sockA, true)
	a := tunnelStatus(t, o.sockA)
	boundOnDistinctELPs(t, "xtrB", o.sockB, pinned, entryOf(a, "10.2.0.0/24"))
	eachRTRItsOwn(t, o, a, r1, r2)

	t.Run("the requests on the wire", func(t *testing.T) {
		time.Sleep(300 * time.Millisecond) // let tshark write the last packets
		capture.Stop()
		// Each of xtrA's subflows was asked for, on its way to the
		// map-server and from there to xtrB: twice at the ms.
		seen := map[control.Flow]int{}
		for _, f := range flowRequests(t, tshark, pcap) {
			seen[f]++
		}
		for _, sf := range a.Dataplane.Subflows {
			f := control.Flow{IID: 1000, Protocol: 6, Source: netip.MustParseAddrPort(sf.Local), Dest: netip.MustParseAddrPort(sf.Remote)}
			if seen[f] != 2 {
				t.Errorf("subflow %s asked for %d times at the ms, want 2 (in and forwarded); all: %v", f, seen[f], seen)
			}
		}
	})

	t.Run("an RTR asking for a subflow not bound gets nothing", func(t *testing.T) {
		before := tunnelStatus(t, o.sockB).Counters.Tunnel.Bindings["rtr_unbound"]
		f := control.Flow{IID: 1000, Protocol: 6, Source: netip.MustParseAddrPort("10.1.0.1:33333"), Dest: netip.MustParseAddrPort("10.2.0.1:5201")}
		if reply := askAsRTR(t, o.rtr1, "10.0.11.2", f); reply != nil {
			t.Errorf("answered: %s", reply)
		}
		if got := tunnelStatus(t, o.sockB).Counters.Tunnel.Bindings["rtr_unbound"]; got != before+1 {
			t.Errorf("rtr_unbound %d, was %d", got, before)
		}
	})

	t.Run("the bindings end with the subflows", func(t *testing.T) {
		// A FIN, then the linger (30 s) and a sweep of xtrB's subflow
		// table, then a sweep of the bindings.
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			st := tunnelStatus(t, o.sockB)
			if len(st.XTR.Bindings) == 0 {
				if c := st.Counters.Tunnel.Bindings; c["ended"] < 2 {
					t.Errorf("bindings %v: want them ended with their subflows", c)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("bindings left: %+v", st.XTR.Bindings)
			}
		}
	})
}

// askAsRTR sends, from nd's address at, a stateful Map-Request for f to
// the map-server, as an RTR of an ELP would, and returns the Map-Reply
// that comes back within a second, if any.
func askAsRTR(t *testing.T, nd *testnet.Node, at string, f control.Flow) *lisp.MapReply {
	t.Helper()
	c, err := nd.ListenUDP("udp4", net.JoinHostPort(at, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	ecm := lisp.ECM{Source: local, Destination: netip.AddrPortFrom(f.Dest.Addr(), 4342), TTL: 64,
		Message: &lisp.MapRequest{Nonce: control.Nonce(), SourceEID: lisp.IPAddress(f.Source.Addr()),
			ITRRLOCs: []lisp.Address{lisp.IPAddress(local.Addr())},
			Records:  []lisp.RequestRecord{{EID: control.FlowAddress(f), MaskLen: 32}}}}
	b, err := ecm.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteToUDPAddrPort(b, netip.MustParseAddrPort("10.0.100.2:4342")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 1500)
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil
	}
	m, err := lisp.Parse(buf[:n])
	if err != nil {
		t.Fatalf("an answer that does not decode: %v", err)
	}
	reply, _ := m.(*lisp.MapReply)
	return reply
}

// TestStatefulDownload is the reverse direction ([LISP-TE] §II: each
// direction bound on its own): hostA opens the connection, hostB sends.
// xtrB, the ITR of the data, asks xtrA, the ETR of hostA's site, for the
// path of each subflow of the replies; xtrA binds them to distinct ELPs
// of site a, and each RTR carries its subflow's data towards site a.
func TestStatefulDownload(t *testing.T) {
	o := buildOverlay(t, overlayOptions{stateful: true})
	mptcpTwoSubflows(t, o)
	if err := echoFlows(o.hostA, o.hostB, "10.2.0.1:7", 16); err != nil {
		t.Fatal(err)
	}
	r1, r2 := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.1.0.1")}}
	d.SetMultipathTCP(true)
	if err := receiveHashed(ctx, o.hostA, o.hostB, d, "10.2.0.1", 32<<20); err != nil {
		t.Fatal(err)
	}

	pinned := pinnedOnDistinctPaths(t, "xtrB", o.sockB, false)
	b := tunnelStatus(t, o.sockB)
	boundOnDistinctELPs(t, "xtrA", o.sockA, pinned, entryOf(b, "10.1.0.0/24"))
	// Site a's ELPs: through rtr1 (path 0) and rtr2 (path 1).
	eachRTRItsOwn(t, o, b, r1, r2)
}

// eachRTRItsOwn checks that rtr1 carried the subflow the ITR of st sent
// on path 0 (its ELP) and rtr2 the one on path 1, each at least what its
// subflow sent and none of the other's, since r1 and r2 (their
// counters before).
func eachRTRItsOwn(t *testing.T, o *overlay, st *daemon.Status, r1, r2 map[string]uint64) {
	t.Helper()
	bytesOn := map[int]uint64{}
	for _, sf := range st.Dataplane.Subflows {
		bytesOn[sf.Path] = sf.Bytes
	}
	r1After, r2After := rtrCounters(t, o.sockR1), rtrCounters(t, o.sockR2)
	if got := r1After["rtr_path0_bytes"] - r1["rtr_path0_bytes"]; got < bytesOn[0] || bytesOn[0] < 1<<20 {
		t.Errorf("rtr1 forwarded %d bytes on ELP 1, its subflow sent %d", got, bytesOn[0])
	}
	if got := r2After["rtr_path1_bytes"] - r2["rtr_path1_bytes"]; got < bytesOn[1] || bytesOn[1] < 1<<20 {
		t.Errorf("rtr2 forwarded %d bytes on ELP 2, its subflow sent %d", got, bytesOn[1])
	}
	if r1After["rtr_path1_packets"] != r1["rtr_path1_packets"] || r2After["rtr_path0_packets"] != r2["rtr_path0_packets"] {
		t.Errorf("an RTR carried the other ELP: rtr1 %v, rtr2 %v", r1After, r2After)
	}
}

// receiveHashed has a host connect to a server it starts on another,
// which sends it n random bytes; the host hashes what it receives.
func receiveHashed(ctx context.Context, client, server *testnet.Node, d *net.Dialer, at string, n int) error {
	ln, err := server.Listen("tcp", net.JoinHostPort(at, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		c.Write(data)
	}()
	c, err := client.Dial(ctx, d, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	h := sha256.New()
	if _, err := io.Copy(h, c); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if [32]byte(h.Sum(nil)) != sha256.Sum256(data) {
		return errors.New("the client received other bytes than were sent")
	}
	return nil
}
