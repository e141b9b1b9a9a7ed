package mapcache

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzHandleReply feeds the map-cache arbitrary Map-Replies and SMRs that
// decode, with the nonce of a request in flight patched in so that the
// records are looked at: nothing may panic, and whatever is installed
// respects the data plane's bounds.
func FuzzHandleReply(f *testing.F) {
	elp := lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.11"), RLOCProbe: true}, {Address: lisp.MustParseAddress("192.0.2.12")}}})
	for _, m := range []lisp.Message{
		&lisp.MapReply{Records: []lisp.MapRecord{record("10.0.0.0/8", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1), locator(elp, 1, 1))}},
		&lisp.MapReply{Records: []lisp.MapRecord{record("10.1.0.0/16", 0)}},
		&lisp.MapReply{Records: []lisp.MapRecord{{TTL: 5, MaskLen: 16,
			EID: lisp.LCAFAddress(&lisp.InstanceID{IID: 7, Address: lisp.MustParseAddress("10.1.0.0")})}}},
		&lisp.MapRequest{SMR: true, SourceEID: lisp.MustParseAddress("10.1.0.1"), ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.1")}},
	} {
		b, err := m.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h := newHarness(t, oneResolver)
		h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
		_, _, req := h.request(t)
		m, err := lisp.Parse(raw)
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *lisp.MapReply:
			m.Nonce = req.Nonce
			h.c.HandleReply(m, etrAddr)
		case *lisp.MapRequest:
			h.c.HandleSMR(m, etrAddr)
		}
		for k, e := range h.dp.entries {
			if !k.Prefix.IsValid() || len(e.Paths) > dataplane.MaxPaths {
				t.Fatalf("installed %v %+v", k, e)
			}
			for _, p := range e.Paths {
				if len(p.Hops) == 0 || len(p.Hops) > dataplane.MaxHops {
					t.Fatalf("installed a path of %d hops", len(p.Hops))
				}
			}
		}
		h.c.Snapshot()
		h.c.Locators()
	})
}
