package dataplane

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

var (
	remoteRLOC  = netip.MustParseAddr("198.51.100.1")
	remoteRLOC6 = netip.MustParseAddr("2001:db8:9::1")
)

// encapsulated is a packet from a remote ITR (or RTR) to one of our RLOCs.
func encapsulated(src, dst netip.Addr, ttl uint8, hdr lisp.DataHeader, inner []byte) []byte {
	return encap(src, dst, 0xc123, ttl, 0, lispHeader(hdr), inner)
}

func TestETRDecapsulates(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		hdr := lisp.DataHeader{NoncePresent: true, Nonce: 0x123456}
		for _, tc := range []struct {
			name       string
			outer, dst netip.Addr
			inner      []byte
			ethType    uint16
		}{
			{"IPv4 in IPv4", remoteRLOC, ourV4, udp(hostB, hostA, 60, []byte("reply")), ethIPv4},
			{"IPv6 in IPv6", remoteRLOC6, ourV6, udp(hostB6, hostA6, 60, []byte("reply")), ethIPv6},
			{"IPv6 in IPv4", remoteRLOC, ourV4, udp(hostB6, hostA6, 60, []byte("reply")), ethIPv6},
			{"IPv4 in IPv6", remoteRLOC6, ourV6, udp(hostB, hostA, 60, []byte("reply")), ethIPv4},
		} {
			t.Run(tc.name, func(t *testing.T) {
				v, out := r.underlay(encapsulated(tc.outer, tc.dst, 64, hdr, tc.inner))
				if v != actOK {
					t.Fatalf("verdict %d, want ok; counters %v", v, nonZero(r.counters()))
				}
				want := eth(r.rlocMAC, nextHopMAC, tc.ethType, tc.inner)
				if !bytes.Equal(out, want) {
					t.Errorf("frame:\n got %x\nwant %x", out, want)
				}
			})
		}
		if c := r.counters(); c["etr_decapsulated"] != 4 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

func TestUnderlayLeavesOthersAlone(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	inner := udp(hostB, hostA, 60, []byte("x"))
	for name, pkt := range map[string][]byte{
		"not for our RLOC": encapsulated(remoteRLOC, netip.MustParseAddr("192.0.2.9"), 64, lisp.DataHeader{}, inner),
		"not UDP 4341":     udp(netip.AddrPortFrom(remoteRLOC, 4342), netip.AddrPortFrom(ourV4, 4342), 64, []byte("control")),
	} {
		v, out := r.underlay(pkt)
		if v != actOK || !bytes.Equal(out[14:], pkt) {
			t.Errorf("%s: verdict %d, changed %v", name, v, !bytes.Equal(out[14:], pkt))
		}
	}
	if c := r.counters(); c["etr_decapsulated"] != 0 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// Malformed encapsulated packets are dropped and counted, never passed on
// half-parsed.
func TestETRMalformed(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		short := encap(remoteRLOC, ourV4, 0xc123, 64, 0, []byte{0x80, 0, 0}, nil) // a 3-byte LISP header
		notIP := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, []byte{0x50, 1, 2, 3, 4, 5, 6, 7})
		cut := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, udp(hostB, hostA, 60, []byte("x"))[:12])
		for name, pkt := range map[string][]byte{"short header": short, "inner not IP": notIP, "inner cut": cut} {
			if v, _ := r.underlay(pkt); v != actShot {
				t.Errorf("%s: verdict %d, want drop", name, v)
			}
		}
		if c := r.counters(); c["etr_malformed"] != 3 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// An RTR on an ELP rewrites the outer header towards the hop after it and
// keeps the LISP header (and so the path ID) as it came.
func TestRTRReencapsulates(t *testing.T) {
	forEachHeaderRead(t, Options{RTR: true}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{EIDInterfaces: []string{}}, opts)
		r.put("10.2.0.0/16", Entry{Paths: []Path{
			elp(1, 50, "198.51.100.11", "203.0.113.21", "203.0.113.1"), // not through us
			elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20", "203.0.113.1"),
		}})
		r.put("fd02::/16", Entry{Paths: []Path{
			elp(1, 50, "2001:db8:9::11", "2001:db8:9::21", "2001:db8:9::1"),
			elp(1, 50, "2001:db8:9::10", "2001:db8:1::1", "2001:db8:9::20", "2001:db8:9::1"),
		}})
		hdr := lisp.DataHeader{NoncePresent: true, Nonce: 0xabcdef}
		hdr.SetPathID(2)
		for _, tc := range []struct {
			name           string
			prev, us, next string
			inner          []byte
		}{
			{"IPv4", "198.51.100.10", "192.0.2.1", "203.0.113.20", udp(hostA, hostB, 60, []byte("x"))},
			{"IPv6", "2001:db8:9::10", "2001:db8:1::1", "2001:db8:9::20", udp(hostA6, hostB6, 60, []byte("x"))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				us := netip.MustParseAddr(tc.us)
				in := encapsulated(netip.MustParseAddr(tc.prev), us, 30, hdr, tc.inner)
				v, out := r.underlay(in)
				if v != actRedirect {
					t.Fatalf("verdict %d; counters %v", v, nonZero(r.counters()))
				}
				want := encap(us, netip.MustParseAddr(tc.next), 0xc123, 29, 0, lispHeader(hdr), tc.inner)
				if got := out[14:]; !bytes.Equal(got, want) {
					t.Errorf("packet:\n got %x\nwant %x", got, want)
				}
				if !bytes.Equal(out[:6], nextHopMAC) || !bytes.Equal(out[6:12], r.rlocMAC) ||
					uint16(out[12])<<8|uint16(out[13]) != ethType(us) {
					t.Errorf("Ethernet header %x", out[:14])
				}
			})
		}
		if c := r.counters(); c["rtr_reencapsulated"] != 2 || c["rtr_path1_packets"] != 2 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// Without a path ID, an RTR recognises the ELP by the hop before it
// (link-disjoint ELPs, [LISP-TE] §III.B.2).
func TestRTRPreviousHop(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}, PathID: "previous-hop"}, Options{RTR: true})
	r.put("10.2.0.0/16", Entry{Paths: []Path{
		elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20", "203.0.113.1"),
		elp(1, 50, "198.51.100.11", "192.0.2.1", "203.0.113.21", "203.0.113.1"),
	}})
	inner := udp(hostA, hostB, 60, []byte("x"))
	for from, next := range map[string]string{"198.51.100.10": "203.0.113.20", "198.51.100.11": "203.0.113.21"} {
		_, out := r.underlay(encapsulated(netip.MustParseAddr(from), ourV4, 30, lisp.DataHeader{}, inner))
		if got := netip.AddrFrom4([4]byte(out[14+16 : 14+20])); got.String() != next {
			t.Errorf("from %s: sent to %s, want %s", from, got, next)
		}
	}
}

// The last hop of an ELP decapsulates; an RTR drops what it has no
// mapping for and asks for it.
func TestRTRLastHopAndMiss(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}, Miss: "drop"}, Options{RTR: true})
	r.put("10.2.0.0/16", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1")}})
	inner := udp(hostA, hostB, 60, []byte("x"))
	if v, _ := r.underlay(encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 30, lisp.DataHeader{}, inner)); v != actOK {
		t.Errorf("last hop: verdict %d, want ok (decapsulated)", v)
	}
	other := udp(hostA, netip.MustParseAddrPort("10.9.0.1:53"), 60, []byte("x"))
	if v, _ := r.underlay(encapsulated(remoteRLOC, ourV4, 30, lisp.DataHeader{}, other)); v != actShot {
		t.Errorf("miss: verdict %d, want drop", v)
	}
	if m := <-r.dp.Misses(); m.EID != netip.MustParseAddr("10.9.0.1") {
		t.Errorf("miss %+v", m)
	}
	// An outer TTL of 1 does not go on.
	r.put("10.2.0.0/16", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.1")}})
	if v, _ := r.underlay(encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 1, lisp.DataHeader{}, inner)); v != actShot {
		t.Errorf("TTL 1: verdict %d, want drop", v)
	}
	if c := r.counters(); c["etr_decapsulated"] != 1 || c["rtr_miss"] != 1 || c["rtr_ttl_expired"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// With miss: hold, an RTR hands what it has no entry for to its hold
// device, and what an entry of action Hold sends on; what comes back
// through the device is sent on, and never handed over again.
func TestRTRHolds(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}}, Options{RTR: true, MissInterval: time.Hour})
	if r.dp.hold != nil || r.dp.holdRTR == nil {
		t.Fatalf("hold devices: the ITR's %v, the RTR's %v", r.dp.hold, r.dp.holdRTR)
	}
	hold := r.dp.holdRTR.ifindex
	hdr := lisp.DataHeader{NoncePresent: true, Nonce: 0xabcdef}
	hdr.SetPathID(1)
	in := encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 30, hdr, udp(hostA, hostB, 60, []byte("x")))
	if v, out := r.underlay(in); v != actRedirect || !bytes.Equal(out[14:], in) {
		t.Fatalf("miss: verdict %d, packet changed: %v", v, !bytes.Equal(out[14:], in))
	}
	if m := <-r.dp.Misses(); m.EID != hostB.Addr() {
		t.Errorf("miss %+v", m)
	}
	released := func() (uint32, []byte) {
		return r.run(r.dp.objs.Underlay, hold, eth(r.dp.holdRTR.mac, nextHopMAC, ethIPv4, in))
	}
	if v, _ := released(); v != actShot {
		t.Errorf("released without an entry: verdict %d, want drop", v)
	}
	r.put("10.2.0.0/16", Entry{Action: Hold, Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20", "203.0.113.1")}})
	if v, out := r.underlay(in); v != actRedirect || !bytes.Equal(out[14:], in) {
		t.Errorf("entry of action hold: verdict %d, packet changed: %v", v, !bytes.Equal(out[14:], in))
	}
	v, out := released()
	want := encap(ourV4, netip.MustParseAddr("203.0.113.20"), 0xc123, 29, 0, lispHeader(hdr), udp(hostA, hostB, 60, []byte("x")))
	if v != actRedirect || !bytes.Equal(out[14:], want) {
		t.Errorf("released: verdict %d, packet\n got %x\nwant %x", v, out[14:], want)
	}
	c := r.counters()
	if c["rtr_held"] != 2 || c["rtr_released"] != 1 || c["rtr_miss"] != 2 || c["rtr_reencapsulated"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// An RTR whose next hop is an EID not expanded yet (a Lookup hop, of the
// EIDs' family even) drops what it cannot send on, counted, rather than
// send it to an EID or hand it to its own routing.
func TestRTRUnresolvedNextHop(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}}, Options{RTR: true})
	p := elp(1, 50, "198.51.100.10", "192.0.2.1", "2001:db8:77::1", "203.0.113.1")
	p.Hops[2].Lookup = true
	r.put("10.2.0.0/16", Entry{Paths: []Path{p}})
	hdr := lisp.DataHeader{}
	hdr.SetPathID(1)
	inner := udp(hostA, hostB, 60, []byte("x"))
	if v, _ := r.underlay(encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 30, hdr, inner)); v != actShot {
		t.Errorf("verdict %d, want drop", v)
	}
	if c := r.counters(); c["rtr_unresolved"] != 1 || c["etr_decapsulated"] != 0 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// Only the rtr role sends packets on: a router without it delivers what
// comes to its RLOCs, even when an ELP it is on goes on after it, and
// asks for no mapping.
func TestETRWithoutRTRRole(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{MissInterval: time.Hour})
	r.put("10.1.0.0/24", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20")}})
	for _, inner := range [][]byte{
		udp(hostB, hostA, 60, []byte("on an ELP through us")),
		udp(hostB, netip.MustParseAddrPort("10.9.0.1:53"), 60, []byte("no mapping")),
	} {
		v, out := r.underlay(encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 64, lisp.DataHeader{}, inner))
		if v != actOK || !bytes.Equal(out[14:], inner) {
			t.Errorf("verdict %d, inner packet delivered %v", v, bytes.Equal(out[14:], inner))
		}
	}
	select {
	case m := <-r.dp.Misses():
		t.Errorf("miss reported: %+v", m)
	case <-time.After(100 * time.Millisecond):
	}
	if c := r.counters(); c["etr_decapsulated"] != 2 || c["rtr_reencapsulated"] != 0 || c["rtr_miss"] != 0 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// The programs know the first RLOCs and RLOC interfaces from their
// settings and look the others up in maps: rloc0 here is the ninth
// interface, its addresses the 17th and 18th RLOCs.
func TestManyRLOCs(t *testing.T) {
	ifaces := []string{"extra0", "extra1", "extra2", "extra3", "extra4", "extra5", "extra6", "extra7", "rloc0"}
	r := newRig(t, config.Dataplane{RLOCInterfaces: ifaces}, Options{})
	if n := len(r.dp.LocalRLOCs()); n != 18 {
		t.Fatalf("%d RLOCs: %v", n, r.dp.LocalRLOCs())
	}
	r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
	r.put("fd02::/16", Entry{Paths: []Path{rloc("2001:db8:9::1", 1, 100)}})
	for _, tc := range []struct{ src, dst netip.AddrPort }{{hostA, hostB}, {hostA6, hostB6}} {
		inner := udp(tc.src, tc.dst, 64, []byte("x"))
		v, out := r.itr(inner)
		outer := netip.MustParseAddr("198.51.100.1")
		if tc.dst.Addr().Is6() {
			outer = netip.MustParseAddr("2001:db8:9::1")
		}
		want := r.wantFrame(outer, lisp.DataHeader{NoncePresent: true}, inner, protoUDP, tc.src, tc.dst)
		if v != actRedirect || !bytes.Equal(maskNonce(out), want) {
			t.Errorf("ITR to %s: verdict %d, frame\n got %x\nwant %x", tc.dst, v, maskNonce(out), want)
		}
	}
	inner := udp(hostB, hostA, 60, []byte("x"))
	for dst, want := range map[string]uint32{"192.0.2.1": actOK, "100.64.0.1": actOK, "2001:db8:64:7::1": actOK,
		"2001:db8:1::1": actOK, "192.0.2.9": actOK} {
		a := netip.MustParseAddr(dst)
		src := remoteRLOC
		if a.Is6() {
			src = remoteRLOC6
		}
		pkt := encapsulated(src, a, 64, lisp.DataHeader{}, inner)
		v, out := r.underlay(pkt)
		if v != want || (dst == "192.0.2.9") != bytes.Equal(out[14:], pkt) {
			t.Errorf("to %s: verdict %d, decapsulated %v", dst, v, bytes.Equal(out[14:], inner))
		}
	}
	if c := r.counters(); c["etr_decapsulated"] != 4 || c["itr_encapsulated"] != 2 {
		t.Errorf("counters %v", nonZero(c))
	}
}

func TestCounterNamesMatchTheProgram(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	if n := int(r.dp.objs.Counters.MaxEntries()); n != len(counterNames) {
		t.Errorf("the program has %d counters, Go names %d", n, len(counterNames))
	}
}
