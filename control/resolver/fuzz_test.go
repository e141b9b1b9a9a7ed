package resolver

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzHandleECM feeds the map-resolver arbitrary ECMs that decode: it may
// drop them, but never panic, and what it sends must decode.
func FuzzHandleECM(f *testing.F) {
	for _, eid := range []lisp.Address{
		lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("10.2.0.1"),
		lisp.LCAFAddress(&lisp.InstanceID{IID: 1000, Address: lisp.MustParseAddress("10.1.0.1")}),
	} {
		raw, err := (&lisp.ECM{
			Source: itr, Destination: netip.MustParseAddrPort("10.1.0.1:4342"),
			Message: &lisp.MapRequest{Nonce: 1, ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
				Records: []lisp.RequestRecord{{EID: eid, MaskLen: 32}}},
		}).AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	r := New(&cfgNoLimit, testDB(), nil)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e lisp.ECM
		if e.DecodeFromBytes(raw) != nil {
			return
		}
		var out control.Outbox
		r.HandleECM(raw, &e, netip.MustParseAddrPort("192.0.2.1:4342"), &out)
		for i := range out.Len() {
			_, b := out.At(i)
			if _, err := lisp.Parse(b); err != nil {
				t.Fatalf("sent something that does not decode: %v", err)
			}
		}
	})
}
