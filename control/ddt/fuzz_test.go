package ddt

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzAuthority feeds a DDT node and a DDT map-server arbitrary ECMs that
// decode: they may drop them, but never panic, and what they send must
// decode.
func FuzzAuthority(f *testing.F) {
	for _, eid := range []lisp.RequestRecord{ask(0, "10.1.2.3"), ask(1000, "10.3.0.1"), ask(0, "2001:db8:1::1"),
		{EID: lisp.NameAddress("host"), MaskLen: 32}} {
		raw, _ := ddtRequest(f, 1, eid)
		f.Add(raw)
	}
	a := &Authority{Node: newNode(f), MapServer: newMapServer(f, withPeers)}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e lisp.ECM
		if e.DecodeFromBytes(raw) != nil {
			return
		}
		var out control.Outbox
		a.HandleECM(raw, &e, netip.MustParseAddrPort("203.0.113.1:4342"), &out)
		for i := range out.Len() {
			_, b := out.At(i)
			if _, err := lisp.Parse(b); err != nil {
				t.Fatalf("sent something that does not decode: %v", err)
			}
		}
	})
}
