package mapserver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzHandleRegister feeds the map-server arbitrary Map-Registers for a
// site that takes unauthenticated ones, so that fuzzed input reaches
// merging, expiry and answers: none may panic, and what it stores must
// still be answered for.
func FuzzHandleRegister(f *testing.F) {
	for _, m := range []*lisp.MapRegister{
		{ProxyReply: true, Records: []lisp.MapRecord{record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"))}},
		{MergeRequest: true, XTRID: &lisp.XTRID{ID: [16]byte{1}}, Records: []lisp.MapRecord{
			record("10.1.2.0/24", lisp.MustParseAddress("192.0.2.2")), record("10.1.3.0/24"),
		}},
		{UseTTL: true, Records: []lisp.MapRecord{{TTL: 0, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16}}},
		{WantMapNotify: true, XTRID: &lisp.XTRID{ID: [16]byte{2}}, Records: []lisp.MapRecord{record("10.1.4.0/24", lisp.MustParseAddress("192.0.2.3"))}},
	} {
		b, err := m.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
	}
	cfg, err := config.Parse([]byte(`
roles: [map-server]
map-server:
  sites:
    - {name: open, allow-unauthenticated: true, anti-replay: false, eid-prefixes: [{prefix: 10.1.0.0/16, accept-more-specifics: true}]}
`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte, minutes uint8) {
		s, err := New(cfg.MapServer, nil)
		if err != nil {
			t.Fatal(err)
		}
		clk := &clock{}
		s.SetClock(clk.now)
		var out control.Outbox
		s.HandleRegister(msg, netip.MustParseAddrPort("192.0.2.9:4342"), &out)
		s.HandleRegister(msg, netip.MustParseAddrPort("192.0.2.10:4342"), &out)
		// What the map-server sends decodes: the Map-Notifies that
		// acknowledge msg copy its records.
		for i := range out.Len() {
			_, b := out.At(i)
			if _, err := lisp.Parse(b); err != nil {
				t.Fatalf("datagram %d sent, %x, does not decode: %v", i, b, err)
			}
		}
		for _, eid := range []string{"10.1.0.1", "10.1.2.3", "10.200.0.1"} {
			s.Resolve(0, netip.MustParseAddr(eid))
		}
		_ = s.Status()
		clk.advance(time.Duration(minutes) * time.Minute)
		s.Expire()
		// Every registration left has a pending timer, and no timer is
		// left without its registration.
		etrs := 0
		for _, v := range s.regs.All() {
			reg := v.reg
			etrs += len(reg.ETRs)
		}
		if etrs != s.expiry.Len() {
			t.Fatalf("%d ETR registrations but %d timers", etrs, s.expiry.Len())
		}
	})
}
