package control

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

func TestReplyAddr(t *testing.T) {
	rlocs := []lisp.Address{{}, lisp.MustParseAddress("2001:db8::1"), lisp.MustParseAddress("192.0.2.1"), lisp.MustParseAddress("192.0.2.2")}
	for from, want := range map[string]string{
		"192.0.2.99":       "192.0.2.1", // the first of the request's family
		"::ffff:192.0.2.9": "192.0.2.1", // an IPv4 source seen on an IPv6 socket
		"2001:db8::99":     "2001:db8::1",
	} {
		if got, ok := ReplyAddr(rlocs, netip.MustParseAddr(from)); !ok || got.String() != want {
			t.Errorf("from %s: %s, %v; want %s", from, got, ok, want)
		}
	}
	if got, ok := ReplyAddr(rlocs[:2], netip.MustParseAddr("192.0.2.99")); !ok || got.String() != "2001:db8::1" {
		t.Errorf("no ITR-RLOC of the family: %s, %v; want the first there is", got, ok)
	}
	if _, ok := ReplyAddr(rlocs[:1], netip.MustParseAddr("192.0.2.99")); ok {
		t.Error("an AFI 0 ITR-RLOC was taken")
	}
}

func TestEIDAddressRoundTrip(t *testing.T) {
	for _, iid := range []uint32{0, 1000} {
		ip := netip.MustParseAddr("10.1.2.3")
		a := EIDAddress(iid, ip)
		if _, isLCAF := a.LCAF().(*lisp.InstanceID); isLCAF != (iid != 0) {
			t.Errorf("instance %d: %s", iid, a)
		}
		if gotIID, gotIP, ok := EIDOf(a); !ok || gotIID != iid || gotIP != ip {
			t.Errorf("EIDOf(%s) = %d %s %v", a, gotIID, gotIP, ok)
		}
	}
	if _, _, ok := EIDOf(lisp.NameAddress("host")); ok {
		t.Error("a name read as an EID")
	}
}

func TestNonceVaries(t *testing.T) {
	a, b := Nonce(), Nonce()
	if a == b {
		t.Error("two nonces in a row are equal")
	}
}
