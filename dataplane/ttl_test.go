package dataplane

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

// ttlOf reads the TTL (hop limit) of an IP packet.
func ttlOf(pkt []byte) uint8 {
	if pkt[0]>>4 == 6 {
		return pkt[7]
	}
	return pkt[8]
}

// RFC 9300 §5.3 at the ITR: the ITR is a hop, so the inner TTL goes down
// by one (the IPv4 header checksum with it) and the outer header starts
// with that TTL; a packet whose TTL would end at the ITR is left to the
// kernel, untouched, which drops it and answers ICMP Time Exceeded (see
// TestTracerouteThroughTheOverlay).
func TestITRDecrementsTTL(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	r.put("10.2.0.0/16", Entry{Paths: []Path{rloc("198.51.100.1", 1, 100)}})
	r.put("fd02::/16", Entry{Paths: []Path{rloc("2001:db8:9::1", 1, 100)}})
	for _, tc := range []struct {
		src, dst netip.AddrPort
		ttl      uint8
		verdict  uint32
	}{
		{hostA, hostB, 64, actRedirect},
		{hostA, hostB, 2, actRedirect},
		{hostA, hostB, 1, actOK},
		{hostA, hostB, 0, actOK},
		{hostA6, hostB6, 2, actRedirect},
		{hostA6, hostB6, 1, actOK},
	} {
		inner := udp(tc.src, tc.dst, tc.ttl, []byte("probe"))
		v, out := r.itr(inner)
		if v != tc.verdict {
			t.Errorf("%v TTL %d: verdict %d, want %d", tc.dst, tc.ttl, v, tc.verdict)
			continue
		}
		if v == actOK {
			if !bytes.Equal(out[14:], inner) {
				t.Errorf("%v TTL %d: the packet left to the kernel was changed", tc.dst, tc.ttl)
			}
			continue
		}
		outer := 20
		if tc.dst.Addr().Is6() {
			outer = 40
		}
		got := out[14+outer+8+8:]
		if ttlOf(out[14:]) != tc.ttl-1 || !bytes.Equal(got, hop(inner)) {
			t.Errorf("%v TTL %d: outer TTL %d, inner\n got %x\nwant %x", tc.dst, tc.ttl, ttlOf(out[14:]), got, hop(inner))
		}
	}
	if c := r.counters(); c["itr_ttl_expired"] != 3 || c["itr_encapsulated"] != 3 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// RFC 9300 §5.3 at the RTR, an ETR and an ITR in one: the packet goes on
// with the smaller of its outer and inner TTLs, minus one, also when the
// ITR before set the outer TTL higher than the inner one; it ends where
// that is 0.
func TestRTRTTL(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}}, Options{RTR: true})
	r.put("10.2.0.0/16", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20")}})
	r.put("fd02::/16", Entry{Paths: []Path{elp(1, 50, "2001:db8:9::10", "2001:db8:1::1", "2001:db8:9::20")}})
	for _, tc := range []struct {
		prev, us           string
		src, dst           netip.AddrPort
		outer, inner, want uint8 // want 0: dropped
	}{
		{"198.51.100.10", "192.0.2.1", hostA, hostB, 30, 60, 29},
		{"198.51.100.10", "192.0.2.1", hostA, hostB, 255, 5, 4},
		{"198.51.100.10", "192.0.2.1", hostA, hostB, 2, 2, 1},
		{"198.51.100.10", "192.0.2.1", hostA, hostB, 1, 60, 0},
		{"198.51.100.10", "192.0.2.1", hostA, hostB, 64, 1, 0},
		{"2001:db8:9::10", "2001:db8:1::1", hostA6, hostB6, 255, 7, 6},
		{"2001:db8:9::10", "2001:db8:1::1", hostA6, hostB6, 64, 1, 0},
	} {
		inner := udp(tc.src, tc.dst, tc.inner, []byte("x"))
		v, out := r.underlay(encapsulated(netip.MustParseAddr(tc.prev), netip.MustParseAddr(tc.us), tc.outer, lisp.DataHeader{}, inner))
		switch {
		case tc.want == 0 && v != actShot:
			t.Errorf("outer %d inner %d: verdict %d, want drop", tc.outer, tc.inner, v)
		case tc.want != 0 && (v != actRedirect || ttlOf(out[14:]) != tc.want):
			t.Errorf("outer %d inner %d: verdict %d, outer TTL %d, want %d", tc.outer, tc.inner, v, ttlOf(out[14:]), tc.want)
		}
	}
	if c := r.counters(); c["rtr_ttl_expired"] != 3 || c["rtr_reencapsulated"] != 4 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// RFC 9300 §5.3 at the ETR: the smaller outer TTL (hop limit) becomes the
// inner one, so that the underlay's hops count; a larger one leaves the
// inner packet as it came. The kernel then forwards it, one hop more.
func TestETRTTL(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		for _, tc := range []struct {
			src, dst           netip.AddrPort
			outerSrc, outerDst netip.Addr
			outer, inner, want uint8
		}{
			{hostB, hostA, remoteRLOC, ourV4, 7, 60, 7},
			{hostB, hostA, remoteRLOC, ourV4, 64, 9, 9},
			{hostB6, hostA6, remoteRLOC6, ourV6, 3, 60, 3},
			{hostB6, hostA6, remoteRLOC6, ourV6, 64, 9, 9},
			{hostB6, hostA6, remoteRLOC, ourV4, 5, 60, 5}, // IPv6 in IPv4
		} {
			inner := udp(tc.src, tc.dst, tc.inner, []byte("x"))
			_, out := r.underlay(encapsulated(tc.outerSrc, tc.outerDst, tc.outer, lisp.DataHeader{}, inner))
			want := bytes.Clone(inner)
			for want[ttlIndex(want)] != tc.want {
				want = hop(want) // the IPv4 checksum kept right
			}
			if got := out[14:]; !bytes.Equal(got, want) {
				t.Errorf("outer %d inner %d: inner packet\n got %x\nwant %x", tc.outer, tc.inner, got, want)
			}
		}
	})
}

func ttlIndex(pkt []byte) int {
	if pkt[0]>>4 == 6 {
		return 7
	}
	return 8
}
