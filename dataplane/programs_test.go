package dataplane

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/inet"
	"github.com/amptcp/amptcp/lisp"
)

var (
	hostA  = netip.MustParseAddrPort("10.1.0.1:40000")
	hostB  = netip.MustParseAddrPort("10.2.0.1:5001")
	hostA6 = netip.MustParseAddrPort("[fd01::1]:40000")
	hostB6 = netip.MustParseAddrPort("[fd02::1]:5001")
	ourV4  = netip.MustParseAddr("192.0.2.1")
	ourV6  = netip.MustParseAddr("2001:db8:1::1")
)

// maskNonce zeroes the LISP nonce of an encapsulated frame (random by
// design) so that frames compare.
func maskNonce(frame []byte) []byte {
	b := bytes.Clone(frame)
	off := 14 + 20 + 8
	if b[14]>>4 == 6 {
		off = 14 + 40 + 8
	}
	copy(b[off+1:off+4], []byte{0, 0, 0})
	return b
}

// wantFrame is an encapsulated frame as the ITR must send it to the next
// hop 192.0.2.2 (or 2001:db8:1::2): the inner packet one hop on, and the
// outer header with its TTL and TOS.
func (r *rig) wantFrame(outerDst netip.Addr, hdr lisp.DataHeader, inner []byte, proto uint8, src, dst netip.AddrPort) []byte {
	outerSrc := ourV4
	if outerDst.Is6() {
		outerSrc = ourV6
	}
	inner = hop(inner)
	var ttl, tos uint8
	if inner[0]>>4 == 4 {
		ttl, tos = inner[8], inner[1]
	} else {
		ttl, tos = inner[7], inner[0]<<4|inner[1]>>4
	}
	hdr.Nonce = 0
	o := encap(outerSrc, outerDst, entropyPort(proto, src, dst), ttl, tos, lispHeader(hdr), inner)
	if outerDst.Is6() {
		h := flowHash(proto, src, dst)
		o[1] |= byte(h>>16) & 0x0f
		o[2], o[3] = byte(h>>8), byte(h)
	}
	return eth(nextHopMAC, r.rlocMAC, ethType(outerDst), o)
}

// hop is an IP packet as a router sends it on: its TTL (hop limit) one
// less, the IPv4 header checksum computed again.
func hop(pkt []byte) []byte {
	b := bytes.Clone(pkt)
	if b[0]>>4 == 6 {
		b[7]--
		return b
	}
	b[8]--
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint16(b[10:], inet.Checksum(b[:int(b[0]&0xf)*4]))
	return b
}

func TestITREncapsulates(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
		r.put("fd02::/16", Entry{Paths: []Path{rloc("2001:db8:9::1", 1, 100)}})
		r.put("10.6.0.0/16", Entry{Paths: []Path{rloc("2001:db8:9::6", 1, 100)}})

		hdr := lisp.DataHeader{NoncePresent: true}
		payload := []byte("amptcp says hello")
		hostC := netip.MustParseAddrPort("10.6.0.1:5001")
		for _, tc := range []struct {
			name     string
			src, dst netip.AddrPort
			outer    string
		}{
			{"IPv4 in IPv4", hostA, hostB, "198.51.100.1"},
			{"IPv6 in IPv6", hostA6, hostB6, "2001:db8:9::1"},
			{"IPv4 in IPv6", hostA, hostC, "2001:db8:9::6"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				inner := udp(tc.src, tc.dst, 63, payload)
				verdict, out := r.itr(inner)
				if verdict != actRedirect {
					t.Fatalf("verdict %d, want redirect (%d); counters %v", verdict, actRedirect, nonZero(r.counters()))
				}
				want := r.wantFrame(netip.MustParseAddr(tc.outer), hdr, inner, protoUDP, tc.src, tc.dst)
				if got := maskNonce(out); !bytes.Equal(got, want) {
					t.Errorf("frame:\n got %x\nwant %x", got, want)
				}
			})
		}
		if c := r.counters(); c["itr_encapsulated"] != 3 || c["itr_path0_packets"] != 3 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// The nonce is random: two packets of a flow carry different ones.
func TestITRNonceVaries(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
	inner := udp(hostA, hostB, 64, []byte("x"))
	_, a := r.itr(inner)
	_, b := r.itr(inner)
	var ha, hb lisp.DataHeader
	ha.DecodeFromBytes(a[14+28:])
	hb.DecodeFromBytes(b[14+28:])
	if !ha.NoncePresent || ha.Nonce == hb.Nonce {
		t.Errorf("nonces %+v and %+v", ha, hb)
	}
}

func TestITRInstanceIDAndPathID(t *testing.T) {
	r := newRig(t, config.Dataplane{InstanceID: 1000}, Options{})
	k := Key{InstanceID: 1000, Prefix: netip.MustParsePrefix("10.2.0.0/16")}
	err := r.dp.Put(k, Entry{Paths: []Path{
		elp(1, 50, "198.51.100.10", "198.51.100.1"),
		elp(1, 50, "203.0.113.10", "198.51.100.1"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// An entry of instance 0 must not match packets of instance 1000.
	r.put("10.2.0.0/16", Entry{Action: Drop})

	inner := udp(hostA, hostB, 64, []byte("x"))
	verdict, out := r.itr(inner)
	if verdict != actRedirect {
		t.Fatalf("verdict %d; counters %v", verdict, nonZero(r.counters()))
	}
	var h lisp.DataHeader
	if err := h.DecodeFromBytes(out[14+28:]); err != nil {
		t.Fatal(err)
	}
	first := netip.AddrFrom4([4]byte(out[14+16 : 14+20]))
	path := 0
	if first == netip.MustParseAddr("203.0.113.10") {
		path = 1
	}
	if !h.IIDPresent || h.InstanceID != 1000 || h.PathID() != uint8(path+1) {
		t.Errorf("header %v, want iid 1000 and path %d (sent to %s)", &h, path+1, first)
	}
	if first != netip.MustParseAddr("198.51.100.10") && first != netip.MustParseAddr("203.0.113.10") {
		t.Errorf("sent to %s, want an ELP's first hop", first)
	}
}

func TestITRMissAndActions(t *testing.T) {
	r := newRig(t, config.Dataplane{Miss: "drop"}, Options{MissInterval: time.Hour})
	inner := udp(hostA, hostB, 64, []byte("x"))
	if v, _ := r.itr(inner); v != actShot {
		t.Fatalf("miss: verdict %d, want drop", v)
	}
	select {
	case m := <-r.dp.Misses():
		if m.EID != hostB.Addr() || m.InstanceID != 0 {
			t.Errorf("miss %+v", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no miss reported")
	}
	// Reported once per interval, however many packets come.
	r.itr(inner)
	r.itr(inner)
	select {
	case m := <-r.dp.Misses():
		t.Errorf("miss reported again: %+v", m)
	case <-time.After(100 * time.Millisecond):
	}
	c := r.counters()
	if c["itr_miss_dropped"] != 3 || c["itr_miss_reported"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}

	r.put("10.2.0.0/16", Entry{Action: NativelyForward})
	if v, out := r.itr(inner); v != actOK || !bytes.Equal(out[14:], inner) {
		t.Errorf("natively-forward: verdict %d, packet changed: %v", v, !bytes.Equal(out[14:], inner))
	}
	r.put("10.2.0.0/16", Entry{Action: Drop})
	if v, _ := r.itr(inner); v != actShot {
		t.Errorf("drop: verdict %d", v)
	}
	// A path that is down is not used; with none up, packets drop.
	r.put("10.2.0.0/16", Entry{Paths: []Path{{Hops: []Hop{{Addr: netip.MustParseAddr("198.51.100.1")}}, Priority: 1}}})
	if v, _ := r.itr(inner); v != actShot {
		t.Errorf("no path up: verdict %d", v)
	}
	// Not IP: left to the kernel.
	arp := eth(r.ethOf(r.eid), hostMAC, 0x0806, make([]byte, 28))
	if v, _ := r.run(r.dp.objs.Itr, r.eid, arp); v != actOK {
		t.Errorf("ARP: verdict %d", v)
	}
	c = r.counters()
	if c["itr_natively_forwarded"] != 1 || c["itr_action_dropped"] != 1 || c["itr_no_path"] != 1 || c["itr_not_ip"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// With miss: hold, the ITR hands what it has no entry for to the hold
// device, and what an entry of action Hold covers too (the control plane
// is releasing what it held); what comes back through the device is
// forwarded by the entry, and never handed over again.
func TestITRHolds(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{MissInterval: time.Hour})
	hold := r.dp.hold.ifindex
	inner := udp(hostA, hostB, 64, []byte("x"))
	if v, out := r.itr(inner); v != actRedirect || !bytes.Equal(out[14:], inner) {
		t.Fatalf("miss: verdict %d, packet changed: %v", v, !bytes.Equal(out[14:], inner))
	}
	if m := <-r.dp.Misses(); m.EID != hostB.Addr() {
		t.Errorf("miss %+v", m)
	}
	released := func() (uint32, []byte) {
		return r.run(r.dp.objs.Itr, hold, eth(r.dp.hold.mac, hostMAC, ethIPv4, inner))
	}
	if v, _ := released(); v != actShot {
		t.Errorf("released without an entry: verdict %d, want drop", v)
	}

	r.put("10.2.0.0/16", Entry{Action: Hold, Paths: []Path{rloc("198.51.100.1", 1, 100)}})
	if v, out := r.itr(inner); v != actRedirect || !bytes.Equal(out[14:], inner) {
		t.Errorf("entry of action hold: verdict %d, packet changed: %v", v, !bytes.Equal(out[14:], inner))
	}
	v, out := released()
	want := r.wantFrame(netip.MustParseAddr("198.51.100.1"), lisp.DataHeader{NoncePresent: true}, inner, protoUDP, hostA, hostB)
	if v != actRedirect || !bytes.Equal(maskNonce(out), want) {
		t.Errorf("released: verdict %d, frame\n got %x\nwant %x", v, maskNonce(out), want)
	}
	r.put("10.2.0.0/16", Entry{Action: Hold})
	if v, out := released(); v != actOK || !bytes.Equal(out[14:], inner) {
		t.Errorf("released by an entry without paths: verdict %d, want it left to the kernel", v)
	}
	c := r.counters()
	if c["itr_held"] != 2 || c["itr_released"] != 2 || c["itr_miss_dropped"] != 1 || c["itr_encapsulated"] != 1 ||
		c["itr_natively_forwarded"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

func TestITRMissNativelyForwarded(t *testing.T) {
	r := newRig(t, config.Dataplane{Miss: "native-forward"}, Options{})
	inner := udp(hostA, hostB, 64, []byte("x"))
	if v, out := r.itr(inner); v != actOK || !bytes.Equal(out[14:], inner) {
		t.Errorf("verdict %d", v)
	}
	if c := r.counters(); c["itr_miss_natively_forwarded"] != 1 || c["itr_miss_reported"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// The MSS of SYNs leaves room for the 36 bytes of IPv4 encapsulation
// (56 of IPv6) on the RLOC interface's 1500-byte MTU, and the TCP
// checksum still holds.
func TestITRClampsMSS(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{MPTCPSubflows: "off"}, opts)
		r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
		r.put("fd02::/16", Entry{Paths: []Path{rloc("2001:db8:9::1", 1, 100)}})
		for _, tc := range []struct {
			src, dst netip.AddrPort
			flags    uint8
			mss      uint16
			want     uint16
			outer    int
		}{
			{hostA, hostB, syn, 1460, 1500 - 36 - 20 - 20, 20},
			{hostA, hostB, syn | ack, 1460, 1500 - 36 - 20 - 20, 20},
			{hostA, hostB, syn, 1200, 1200, 20}, // small enough already
			{hostA6, hostB6, syn, 1440, 1500 - 56 - 40 - 20, 40},
		} {
			inner := tcp(tc.src, tc.dst, 64, tcpSeg{flags: tc.flags, options: optMSS(tc.mss)})
			v, out := r.itr(inner)
			if v != actRedirect {
				t.Fatalf("verdict %d", v)
			}
			got := out[14+tc.outer+8+8:]
			l3 := 20
			if tc.src.Addr().Is6() {
				l3 = 40
			}
			mss := binary.BigEndian.Uint16(got[l3+20+2:])
			if mss != tc.want || !validL4(got) {
				t.Errorf("%v MSS %d: clamped to %d, want %d; checksum valid %v", tc.src, tc.mss, mss, tc.want, validL4(got))
			}
		}
		if c := r.counters(); c["itr_mss_clamped"] != 3 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// A packet that would not fit the RLOC interface's MTU once encapsulated
// is dropped and counted rather than fragmented or leaked.
func TestITRTooBig(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
	if v, _ := r.itr(udp(hostA, hostB, 64, make([]byte, 1500-36-28))); v != actRedirect {
		t.Errorf("a packet that fits: verdict %d", v)
	}
	if v, _ := r.itr(udp(hostA, hostB, 64, make([]byte, 1500-36-28+1))); v != actShot {
		t.Errorf("one byte too big: verdict %d", v)
	}
	if c := r.counters(); c["itr_too_big"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

func nonZero(c Counters) map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range c {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}
