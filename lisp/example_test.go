package lisp_test

import (
	"fmt"
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// An ETR registers its EID-prefix and two RLOCs, authenticated with its
// site's key; the map-server checks the bytes as they arrived.
func ExampleMapRegister_AppendSigned() {
	key := []byte("site key")
	reg := &lisp.MapRegister{
		WantMapNotify: true,
		Nonce:         0x1234,
		Auth:          lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
		Records: []lisp.MapRecord{{
			TTL: 1440, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16, Authoritative: true,
			Locators: []lisp.Locator{
				{Priority: 1, Weight: 50, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")},
				{Priority: 1, Weight: 50, Reachable: true, Address: lisp.MustParseAddress("198.51.100.1")},
			},
		}},
	}
	wire, err := reg.AppendSigned(nil, key)
	if err != nil {
		panic(err)
	}

	// At the map-server.
	fmt.Println("verify:", lisp.Verify(wire, key))
	fmt.Println("verify with another key:", lisp.Verify(wire, []byte("guess")))
	m, err := lisp.Parse(wire)
	if err != nil {
		panic(err)
	}
	got := m.(*lisp.MapRegister)
	fmt.Println(got.Records[0].EID, len(got.Records[0].Locators), "locators, want Map-Notify:", got.WantMapNotify)
	// Output:
	// verify: <nil>
	// verify with another key: authentication data does not match
	// 10.1.0.0 2 locators, want Map-Notify: true
}

// An ITR reads the paths of a Map-Reply: each locator is an RLOC or an
// Explicit Locator Path, alone or in an AFI List.
func ExampleParse() {
	reply := &lisp.MapReply{Nonce: 7, Records: []lisp.MapRecord{{
		TTL: 60, EID: lisp.MustParseAddress("10.2.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{
			{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")},
			{Priority: 1, Weight: 100, Reachable: true, Address: lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{
				{}, // no RLOC: the locator is the path
				lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
					{Address: lisp.MustParseAddress("198.51.100.7"), RLOCProbe: true},
					{Address: lisp.IPAddress(netip.MustParseAddr("203.0.113.9"))},
				}}),
			}})},
		},
	}}}
	wire, err := reply.AppendBinary(nil)
	if err != nil {
		panic(err)
	}

	m, err := lisp.Parse(wire)
	if err != nil {
		panic(err)
	}
	for _, loc := range m.(*lisp.MapReply).Records[0].Locators {
		fmt.Println(describe(loc.Address))
	}
	// Output:
	// RLOC 192.0.2.1
	// path elp{198.51.100.7(P) -> 203.0.113.9}
}

func describe(a lisp.Address) string {
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		return "path " + l.String()
	case *lisp.AFIList:
		for _, inner := range l.Addresses {
			if _, ok := inner.LCAF().(*lisp.ELP); ok {
				return describe(inner)
			}
		}
	}
	return "RLOC " + a.String()
}
