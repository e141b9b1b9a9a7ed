package lisp_test

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

func TestAddressConstructorsAndAccessors(t *testing.T) {
	zoned := lisp.IPAddress(netip.MustParseAddr("fe80::1%eth0"))
	if zoned.IP() != netip.MustParseAddr("fe80::1") || !zoned.Equal(ip("fe80::1")) {
		t.Errorf("zone kept: %s", zoned)
	}
	if got := lisp.IPAddress(netip.Addr{}); !got.IsZero() || got.AFI() != lisp.AFINone {
		t.Errorf("invalid netip.Addr gave %s", got)
	}
	if got := lisp.IPAddress(netip.MustParseAddr("::ffff:192.0.2.1")); got.AFI() != lisp.AFIIPv6 {
		t.Errorf("IPv4-mapped address has AFI %s, want IPv6", got.AFI())
	}
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	if a := lisp.MACAddress(mac); a.MAC() != mac || a.String() != "02:00:00:00:00:01" || a.IP().IsValid() {
		t.Errorf("MAC address: %s", a)
	}
	if a := lisp.NameAddress("x"); a.Name() != "x" || a.LCAF() != nil || a.String() != `"x"` {
		t.Errorf("name address: %s", a)
	}
	var nilELP *lisp.ELP
	if a := lisp.LCAFAddress(nilELP); !a.IsZero() {
		t.Errorf("LCAFAddress(nil *ELP) = %s, want the empty address", a)
	}
	// Equal compares what is on the wire: the same ELP built twice.
	elp := func() lisp.Address {
		return lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{{Address: ip("192.0.2.1"), Strict: true}}})
	}
	if a, b := elp(), elp(); !a.Equal(b) || a.Equal(ip("192.0.2.1")) {
		t.Errorf("Equal on ELPs: %v, %v", a.Equal(b), a.Equal(ip("192.0.2.1")))
	}
}

// PathOf finds the ELP of a locator in the forms deployed software sends
// it, and nothing in other addresses.
func TestPathOf(t *testing.T) {
	elp := &lisp.ELP{Hops: []lisp.ELPHop{{Address: ip("192.0.2.10")}, {Address: ip("198.51.100.1")}}}
	list := func(a ...lisp.Address) lisp.Address { return lisp.LCAFAddress(&lisp.AFIList{Addresses: a}) }
	for name, tc := range map[string]struct {
		a    lisp.Address
		want *lisp.ELP
	}{
		"bare ELP":                 {lisp.LCAFAddress(elp), elp},
		"AFI List of AFI 0, ELP":   {list(lisp.Address{}, lisp.LCAFAddress(elp)), elp},
		"AFI List of RLOC, ELP":    {list(ip("198.51.100.1"), lisp.LCAFAddress(elp)), elp},
		"RLOC":                     {ip("198.51.100.1"), nil},
		"AFI List of two RLOCs":    {list(ip("198.51.100.1"), ip("2001:db8::1")), nil},
		"instance ID around an IP": {lisp.LCAFAddress(&lisp.InstanceID{IID: 7, Address: ip("10.0.0.1")}), nil},
	} {
		if got := lisp.PathOf(tc.a); got != tc.want {
			t.Errorf("%s: PathOf(%s) = %v, want %v", name, tc.a, got, tc.want)
		}
	}
}
