package dataplane_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/amptcp/amptcp/config"
)

// A traceroute from hostA to hostB through the overlay sees the xTRs as
// hops (RFC 9300 §5.3): a UDP probe with TTL 1 ends at xtrA, which
// answers ICMP Time Exceeded from its site address; one with TTL 2 ends
// at xtrB, once decapsulated; one with TTL 3 reaches hostB, whose port
// is closed. The xTRs have a default route towards the underlay, as an
// xTR has towards its provider: the kernel answers Time Exceeded for a
// packet it has a route for (without one, Destination Unreachable).
func TestTracerouteThroughTheOverlay(t *testing.T) {
	s := newSites(t, config.Dataplane{})
	s.xtrA.AddRoute("default", "192.0.2.2")
	s.xtrB.AddRoute("default", "192.0.2.1")
	var ic *icmp.PacketConn
	err := s.hostA.Do(func() (err error) {
		ic, err = icmp.ListenPacket("ip4:icmp", "10.1.0.1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	c, err := s.hostA.ListenUDP("udp4", "10.1.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	xtrB := map[netip.Addr]bool{
		netip.MustParseAddr("192.0.2.2"): true, netip.MustParseAddr("192.0.2.6"): true, netip.MustParseAddr("10.2.0.254"): true,
	}
	for _, tc := range []struct {
		ttl  int
		typ  ipv4.ICMPType
		from func(netip.Addr) bool
	}{
		{1, ipv4.ICMPTypeTimeExceeded, func(a netip.Addr) bool { return a == netip.MustParseAddr("10.1.0.254") }},
		{2, ipv4.ICMPTypeTimeExceeded, func(a netip.Addr) bool { return xtrB[a] }},
		{3, ipv4.ICMPTypeDestinationUnreachable, func(a netip.Addr) bool { return a == netip.MustParseAddr("10.2.0.1") }},
	} {
		port := 33434 + tc.ttl
		typ, from, err := probe(c, ic, tc.ttl, netip.MustParseAddrPort("10.2.0.1:0"), port)
		if err != nil {
			t.Fatalf("TTL %d: %v", tc.ttl, err)
		}
		if typ != tc.typ || !tc.from(from) {
			t.Errorf("TTL %d: %v from %s, want %v from the hop", tc.ttl, typ, from, tc.typ)
		}
	}
	if a := counters(t, s.dpA); a["itr_ttl_expired"] != 1 || a["itr_encapsulated"] < 2 {
		t.Errorf("xtrA %v", nonZero(a))
	}
}

// probe sends a UDP datagram to port of dst with the TTL and returns the
// ICMP error that quotes it: its type and who sent it. It tries 3 times,
// a second apart: a probe is one datagram.
func probe(c *net.UDPConn, ic *icmp.PacketConn, ttl int, dst netip.AddrPort, port int) (ipv4.ICMPType, netip.Addr, error) {
	if err := ipv4.NewConn(c).SetTTL(ttl); err != nil {
		return 0, netip.Addr{}, err
	}
	to := netip.AddrPortFrom(dst.Addr(), uint16(port))
	buf := make([]byte, 1500)
	for range 3 {
		if _, err := c.WriteToUDPAddrPort([]byte("probe"), to); err != nil {
			return 0, netip.Addr{}, err
		}
		ic.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, peer, err := ic.ReadFrom(buf)
			if err != nil {
				break // timed out: send again
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil {
				continue
			}
			var quoted []byte
			switch b := m.Body.(type) {
			case *icmp.TimeExceeded:
				quoted = b.Data
			case *icmp.DstUnreach:
				quoted = b.Data
			default:
				continue
			}
			// The quoted IPv4 header and the first 8 bytes of the UDP
			// datagram: its destination port tells the probe.
			if len(quoted) < 28 || int(quoted[0]&0xf)*4+4 > len(quoted) {
				continue
			}
			udp := quoted[int(quoted[0]&0xf)*4:]
			if int(udp[2])<<8|int(udp[3]) != port {
				continue
			}
			from, _ := netip.AddrFromSlice(peer.(*net.IPAddr).IP)
			return m.Type.(ipv4.ICMPType), from.Unmap(), nil
		}
	}
	return 0, netip.Addr{}, errors.New("no ICMP answer to 3 probes")
}
