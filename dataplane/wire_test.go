package dataplane_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/ethtool"
	"github.com/amptcp/amptcp/internal/procnet"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
)

// userXTR is another implementation's xTR, in user space, as one is
// written: a UDP socket on port 4341 whose datagrams it decapsulates into
// a TUN device, and the packets the kernel routes into the TUN device,
// which it encapsulates to lispd's RLOC. It sees only the bytes of what
// it receives, none of the kernel's metadata.
type userXTR struct {
	conn *net.UDPConn
	tun  *os.File
	peer [2]netip.AddrPort // lispd's RLOCs, IPv4 and IPv6, port 4341

	mu     sync.Mutex
	maxLen int // of the datagrams received
}

// newUserXTR opens tun0 in nd with the site's addresses (CIDRs), the
// routes to the other site's prefixes through it, and the MTU of the
// overlay.
func newUserXTR(t testing.TB, nd *testnet.Node, peer [2]netip.AddrPort, mtu int, addrs, routes []string) *userXTR {
	t.Helper()
	conn, err := nd.ListenUDP("udp", ":4341")
	if err != nil {
		t.Fatal(err)
	}
	// RFC 9300 §5.3: an ETR accepts a zero UDP checksum, which lispd's
	// ITR sends over IPv6 too (RFC 6935); Linux drops such datagrams
	// unless the socket says so.
	raw, err := conn.SyscallConn()
	if err == nil {
		raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1) })
	}
	if err != nil {
		t.Fatalf("UDP_NO_CHECK6_RX: %v", err)
	}
	var fd int
	err = nd.Do(func() error {
		// Opened inside the namespace, tun(4) makes the device there.
		if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		ifr, err := unix.NewIfreq("tun0")
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		return unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	})
	if err != nil {
		t.Fatalf("create tun0: %v", err)
	}
	x := &userXTR{conn: conn, tun: os.NewFile(uintptr(fd), "tun0"), peer: peer}
	t.Cleanup(func() { x.tun.Close() })
	nl := nd.Netlink()
	l, err := nl.LinkByName("tun0")
	if err == nil {
		err = nl.LinkSetMTU(l, mtu)
	}
	for _, a := range addrs {
		if err != nil {
			break
		}
		var ad *netlink.Addr
		if ad, err = netlink.ParseAddr(a); err == nil {
			ad.Flags = unix.IFA_F_NODAD
			err = nl.AddrAdd(l, ad)
		}
	}
	if err == nil {
		err = nl.LinkSetUp(l)
	}
	for _, r := range routes {
		if err != nil {
			break
		}
		_, dst, _ := net.ParseCIDR(r)
		err = nl.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})
	}
	if err != nil {
		t.Fatalf("set tun0 up: %v", err)
	}
	go x.decapsulate()
	go x.encapsulate()
	return x
}

func (x *userXTR) decapsulate() {
	buf := make([]byte, 1<<16)
	for {
		n, err := x.conn.Read(buf)
		if err != nil {
			return
		}
		x.mu.Lock()
		x.maxLen = max(x.maxLen, n)
		x.mu.Unlock()
		var h lisp.DataHeader
		if h.DecodeFromBytes(buf[:n]) == nil && n > lisp.DataHeaderLen {
			x.tun.Write(buf[lisp.DataHeaderLen:n])
		}
	}
}

func (x *userXTR) encapsulate() {
	buf := make([]byte, 1<<16)
	hdr := lisp.DataHeader{NoncePresent: true, Nonce: 0x5a5a5a}
	for {
		n, err := x.tun.Read(buf[lisp.DataHeaderLen:])
		if err != nil {
			return
		}
		hdr.AppendBinary(buf[:0])
		peer := x.peer[0]
		if buf[lisp.DataHeaderLen]>>4 == 6 {
			peer = x.peer[1]
		}
		x.conn.WriteToUDPAddrPort(buf[:lisp.DataHeaderLen+n], peer)
	}
}

// largest is the size of the largest datagram received.
func (x *userXTR) largest() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.maxLen
}

// interop is site A's host and lispd's xTR, whose RLOC interface is a
// veth to site B's xTR: a user-space one, whose own node is site B's host,
// or lispd's, with a host behind it.
//
//	hostA 10.1.0.1, fd01::1 -- xtrA ==(192.0.2.0/30, 2001:db8:1::/64)== xtrB [-- hostB] 10.2.0.1, fd02::1
type interop struct {
	hostA, xtrA, xtrB, hostB *testnet.Node
	siteA, under             *testnet.Link
	user                     *userXTR // nil for lispd's xTR B
}

// overlayMTU is the inner MTU over an IPv6 underlay, the smaller of the
// two families': 1444.
const overlayMTU = 1500 - 56

func newInterop(t testing.TB, completeChecksums, userSpace bool) *interop {
	t.Helper()
	n := testnet.New(t)
	o := &interop{hostA: n.Node("hosta"), xtrA: n.Node("xtra"), xtrB: n.Node("xtrb")}
	o.siteA = n.Link(o.hostA, o.xtrA, "10.1.0.1/24,fd01::1/64", "10.1.0.254/24,fd01::fe/64")
	o.under = n.Link(o.xtrA, o.xtrB, "192.0.2.1/30,2001:db8:1::1/64", "192.0.2.2/30,2001:db8:1::2/64")
	o.hostA.AddRoute("default", "10.1.0.254")
	o.hostA.AddRoute("::/0", "fd01::fe")
	o.xtrA.EnableForwarding()
	var complete []string
	if completeChecksums {
		complete = []string{o.under.Iface(o.xtrA)}
	}
	a := loadXTR(t, o.xtrA, o.siteA.Iface(o.xtrA), o.under.Iface(o.xtrA), complete)
	for prefix, e := range map[string]dataplane.Entry{
		"10.1.0.0/24": {Action: dataplane.NativelyForward}, "fd01::/64": {Action: dataplane.NativelyForward},
		"10.2.0.0/24": oneRLOC("192.0.2.2"), "fd02::/64": oneRLOC("2001:db8:1::2"),
	} {
		put(t, a, prefix, e)
	}
	if userSpace {
		o.hostB = o.xtrB
		o.xtrB.SetSysctl("net.ipv4.conf.all.rp_filter", "0")
		o.user = newUserXTR(t, o.xtrB, [2]netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:4341"), netip.MustParseAddrPort("[2001:db8:1::1]:4341")},
			overlayMTU, []string{"10.2.0.1/24", "fd02::1/64"}, []string{"10.1.0.0/24", "fd01::/64"})
		return o
	}
	o.hostB = n.Node("hostb")
	siteB := n.Link(o.xtrB, o.hostB, "10.2.0.254/24,fd02::fe/64", "10.2.0.1/24,fd02::1/64")
	o.hostB.AddRoute("default", "10.2.0.254")
	o.hostB.AddRoute("::/0", "fd02::fe")
	o.xtrB.EnableForwarding()
	b := loadXTR(t, o.xtrB, siteB.Iface(o.xtrB), o.under.Iface(o.xtrB), nil)
	for prefix, e := range map[string]dataplane.Entry{
		"10.2.0.0/24": {Action: dataplane.NativelyForward}, "fd02::/64": {Action: dataplane.NativelyForward},
		"10.1.0.0/24": oneRLOC("192.0.2.1"), "fd01::/64": oneRLOC("2001:db8:1::1"),
	} {
		put(t, b, prefix, e)
	}
	return o
}

// loadXTR loads lispd's data plane in nd as an xTR's.
func loadXTR(t testing.TB, nd *testnet.Node, eid, rloc string, completeChecksums []string) *dataplane.Dataplane {
	t.Helper()
	cfg := config.Dataplane{EIDInterfaces: []string{eid}, RLOCInterfaces: []string{rloc}, CompleteChecksums: completeChecksums}
	(&config.Config{Roles: []config.Role{config.RoleXTR}, Dataplane: &cfg}).Defaults()
	var d *dataplane.Dataplane
	if err := nd.Do(func() (err error) { d, err = dataplane.New(&cfg, dataplane.Options{}); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func oneRLOC(rloc string) dataplane.Entry {
	return dataplane.Entry{Paths: []dataplane.Path{{Hops: []dataplane.Hop{{Addr: netip.MustParseAddr(rloc)}}, Priority: 1, Weight: 100, Up: true}}}
}

// TCP and UDP through lispd's ITR to an xTR that decapsulates in user
// space, behind a veth: with complete-checksums on the RLOC interface, the
// hosts' unfinished checksums (CHECKSUM_PARTIAL) are completed and their
// GSO packets segmented before they leave, for IPv4 and IPv6, GSO and not.
// The connections complete and carry their bytes, the user-space xTR's
// host counts no checksum error, no datagram is larger than the overlay's
// MTU, and tshark, validating checksums, finds every inner TCP and UDP
// checksum of the underlay capture good. (Without complete-checksums, the
// first SYN is dropped with TcpInCsumErrors: a veth never completes a
// checksum, and a UDP socket hands its payload over as it is.)
func TestUserSpaceETR(t *testing.T) {
	tshark := testenv.RequireTool(t, "tshark")
	o := newInterop(t, true, true)
	hostA, etr, site, under, u := o.hostA, o.xtrB, o.siteA, o.under, o.user

	pcap := filepath.Join(t.TempDir(), "underlay.pcap")
	capture := etr.Start(t, tshark, "-i", under.Iface(etr), "-w", pcap,
		"-f", "udp port 4341 and (src host 192.0.2.1 or src host 2001:db8:1::1)")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(capture.Output(), "Capturing on"); {
		if time.Now().After(deadline) {
			t.Fatalf("tshark did not start capturing: %s", capture.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := snmpOf(t, etr)

	servers := map[string][2]string{"IPv4": {"10.1.0.1", "10.2.0.1"}, "IPv6": {"fd01::1", "fd02::1"}}
	for _, gso := range []bool{true, false} {
		name := "GSO"
		if !gso {
			name = "no GSO"
			offloads(t, hostA, site.Iface(hostA), false) // MTU-sized packets, checksums still unfinished
		}
		for family, ends := range servers {
			t.Run(fmt.Sprintf("TCP %s %s", family, name), func(t *testing.T) {
				transfer(t, hostA, etr, netip.AddrPortFrom(netip.MustParseAddr(ends[0]), 0),
					net.JoinHostPort(ends[1], "0"), false, 4<<20, nil)
			})
			t.Run(fmt.Sprintf("UDP %s %s", family, name), func(t *testing.T) {
				sendUDP(t, hostA, etr, ends[0], ends[1], gso)
			})
		}
	}
	offloads(t, hostA, site.Iface(hostA), true)

	after := snmpOf(t, etr)
	for _, c := range []string{"Tcp.InCsumErrors", "Udp.InCsumErrors", "Udp6InCsumErrors"} {
		if after[c] != before[c] {
			t.Errorf("the user-space xTR's host counted %d %s", after[c]-before[c], c)
		}
	}
	// What the user-space xTR's socket dropped never reached its host's
	// TCP, which then counts no checksum error for it: told, for a bad
	// checksum in the capture below.
	for _, c := range []string{"Udp.RcvbufErrors", "Udp6RcvbufErrors"} {
		if d := after[c] - before[c]; d > 0 {
			t.Logf("the user-space xTR's socket dropped %d datagrams (%s)", d, c)
		}
	}
	if got := u.largest(); got > overlayMTU+lisp.DataHeaderLen {
		t.Errorf("a datagram of %d bytes reached the user-space xTR, above the overlay's MTU %d and the LISP header", got, overlayMTU)
	}
	time.Sleep(300 * time.Millisecond) // let tshark write the last packets
	capture.Stop()
	checkInnerChecksums(t, tshark, pcap)
}

// offloads turns TSO and GSO on or off on a host's interface: off, the
// host sends MTU-sized packets, still with unfinished checksums.
func offloads(t *testing.T, nd *testnet.Node, iface string, on bool) {
	t.Helper()
	err := nd.Do(func() error {
		for _, o := range []ethtool.Offload{ethtool.TSO, ethtool.GSO} {
			if err := ethtool.Set(iface, o, on); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sendUDP sends datagrams from a host of site A to one of the user-space
// xTR's site and checks that each arrives whole: ten of 1000 bytes, in
// one GSO write (UDP_SEGMENT) or one by one.
func sendUDP(t *testing.T, from, to *testnet.Node, src, dst string, gso bool) {
	t.Helper()
	sink, err := to.ListenUDP("udp", net.JoinHostPort(dst, "0"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := from.ListenUDP("udp", net.JoinHostPort(src, "0"))
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 10, 1000
	var all []byte
	for i := range n {
		all = append(all, bytes.Repeat([]byte{byte('a' + i)}, size)...)
	}
	peer := sink.LocalAddr().(*net.UDPAddr).AddrPort()
	if gso {
		raw, err := c.SyscallConn()
		if err == nil {
			raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, size) })
		}
		if err != nil {
			t.Fatalf("UDP_SEGMENT: %v", err)
		}
		if _, err := c.WriteToUDPAddrPort(all, peer); err != nil {
			t.Fatal(err)
		}
	} else {
		for i := range n {
			if _, err := c.WriteToUDPAddrPort(all[i*size:(i+1)*size], peer); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf := make([]byte, 2*size)
	sink.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		m, err := sink.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i+1, n, err)
		}
		if !bytes.Equal(buf[:m], all[i*size:(i+1)*size]) {
			t.Fatalf("datagram %d: %d bytes %q..., want %d of %q", i+1, m, buf[:min(m, 4)], size, all[i*size])
		}
	}
}

func snmpOf(t *testing.T, nd *testnet.Node) map[string]uint64 {
	t.Helper()
	var c map[string]uint64
	if err := nd.Do(func() (err error) { c, err = procnet.Counters("/proc/thread-self/net"); return err }); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkInnerChecksums has tshark validate the checksums of the inner TCP
// and UDP headers of the encapsulated packets in pcap: none bad, and
// thousands good. (The outer UDP checksum is 0: tunnels need none.)
func checkInnerChecksums(t *testing.T, tshark, pcap string) {
	t.Helper()
	out, err := exec.Command(tshark, "-r", pcap, "-d", "udp.port==4341,lisp-data",
		"-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=|", "-e", "tcp.checksum.status", "-e", "udp.checksum.status", "-e", "frame.number", "-e", "_ws.col.Protocol", "-e", "_ws.col.Info",
		"-e", "tcp.checksum", "-e", "tcp.checksum_calculated", "-e", "frame.len").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	good, bad := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		tcp, udp := f[0], f[1]
		// tcp is the inner TCP's status; udp lists the outer UDP's and,
		// for UDP inside, the inner one's: 0 bad, 1 good, 2 unverified.
		statuses := strings.Split(udp, ",")[1:]
		if tcp != "" {
			statuses = append(statuses, tcp)
		}
		for _, s := range statuses {
			// A TCP checksum of 0xffff where it should be 0x0000 (RFC
			// 1624: the two zeros of one's complement, both valid for a
			// receiver): the kernel's software segmentation writes it
			// about once in 65,536 segments, and tshark flags it.
			if s == "0" && strings.Contains(f[4], "[TCP CHECKSUM 0xFFFF]") {
				s = "1"
			}
			switch s {
			case "0":
				if bad++; bad <= 5 {
					t.Logf("bad checksum: frame %s (%s bytes) %s %s; TCP checksum %s, calculated %s", f[2], f[7], f[3], f[4], f[5], f[6])
				}
			case "1":
				good++
			}
		}
	}
	if bad > 0 || good < 1000 {
		t.Errorf("tshark: %d inner checksums bad, %d good, want none bad and thousands good", bad, good)
	}
}
