package dataplane

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/lisp"
)

// The hold devices read the destination EID of what the programs hand
// over: the ITR's packets' own, the RTR's inner one, with the instance ID
// of the LISP header.
func TestHeldDestinations(t *testing.T) {
	inner4, inner6 := udp(hostA, hostB, 60, []byte("x")), udp(hostA6, hostB6, 60, []byte("x"))
	if eid, ok := destination(inner4, unix.ETH_P_IP); !ok || eid != hostB.Addr() {
		t.Errorf("IPv4: %v %v", eid, ok)
	}
	if eid, ok := destination(inner6, unix.ETH_P_IPV6); !ok || eid != hostB6.Addr() {
		t.Errorf("IPv6: %v %v", eid, ok)
	}
	if _, ok := destination(inner4[:19], unix.ETH_P_IP); ok {
		t.Error("a cut IPv4 header gave a destination")
	}
	hdr := lisp.DataHeader{NoncePresent: true, IIDPresent: true, InstanceID: 1000}
	for _, tc := range []struct {
		inner []byte
		outer netip.Addr
		typ   uint16
		want  netip.Addr
	}{
		{inner6, ourV4, unix.ETH_P_IP, hostB6.Addr()},
		{inner4, ourV6, unix.ETH_P_IPV6, hostB.Addr()},
	} {
		src := remoteRLOC
		if tc.outer.Is6() {
			src = remoteRLOC6
		}
		pkt := encapsulated(src, tc.outer, 60, hdr, tc.inner)
		iid, eid, ok := innerDestination(pkt, tc.typ)
		if !ok || iid != 1000 || eid != tc.want {
			t.Errorf("inner destination %d %v %v, want 1000 %v", iid, eid, ok, tc.want)
		}
		if _, _, ok := innerDestination(pkt[:len(pkt)-len(tc.inner)+10], tc.typ); ok {
			t.Errorf("a cut inner header to %v gave a destination", tc.want)
		}
	}
}
