package xtr

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzHandle feeds the xtr arbitrary Map-Requests and Map-Notifies that
// decode, the latter with the nonce of a Map-Register awaiting its
// Map-Notify: it may refuse them, but never panic, never accept or
// acknowledge a Map-Notify it cannot verify, and what it answers must
// decode.
func FuzzHandle(f *testing.F) {
	for _, m := range []lisp.Message{
		request("10.1.0.1", false, "192.0.2.50"),
		request("10.7.0.1", true, "192.0.2.50", "2001:db8::1"),
		&lisp.MapRequest{ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.50")}, Records: []lisp.RequestRecord{{
			EID: lisp.LCAFAddress(&lisp.InstanceID{IID: 5, Address: lisp.MustParseAddress("10.1.0.0")}), MaskLen: 16}}},
		&lisp.MapNotify{Auth: lisp.Auth{KeyID: 3, Algorithm: lisp.AuthHMACSHA256, Data: make([]byte, 32)}},
	} {
		b, err := m.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	h := newHarness(f, siteConfig)
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := lisp.Parse(raw)
		if err != nil {
			return
		}
		var out control.Outbox
		switch m := m.(type) {
		case *lisp.MapRequest:
			h.x.HandleRequest(m, 61000, netip.MustParseAddrPort("192.0.2.50:4342"), &out)
		case *lisp.MapNotify:
			h.x.Tick()
			h.net.take()
			h.x.mu.Lock()
			for n := range h.x.nonces { // any nonce awaiting its Map-Notify
				binary.BigEndian.PutUint64(raw[4:], n) // after the header word
				break
			}
			h.x.mu.Unlock()
			taken := func() uint64 { c := h.x.Counters(); return c.Notifies[NotifyAccepted] + c.Notifies[NotifyUnsolicited] }
			before := taken()
			h.x.HandleNotify(raw, msA, &out)
			if taken() != before && lisp.Verify(raw, []byte(keyA)) != nil && lisp.Verify(raw, []byte(keyB)) != nil {
				t.Fatal("accepted a Map-Notify that verifies with no key")
			}
		}
		for i := range out.Len() {
			if _, b := out.At(i); func() error { _, err := lisp.Parse(b); return err }() != nil {
				t.Fatalf("answered something that does not decode")
			}
		}
	})
}
