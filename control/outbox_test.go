package control

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

func TestOutboxPacksAndReuses(t *testing.T) {
	var o Outbox
	a := netip.MustParseAddrPort("192.0.2.1:4342")
	b := netip.MustParseAddrPort("[2001:db8::1]:61000")
	reply := &lisp.MapReply{Nonce: 7}
	if err := o.AppendMessage(a, reply); err != nil {
		t.Fatal(err)
	}
	o.AppendBytes(b, []byte{1, 2, 3})
	notify := &lisp.MapNotify{Nonce: 9, Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256}}
	if err := o.AppendSigned(a, notify, []byte("k")); err != nil {
		t.Fatal(err)
	}
	if o.Len() != 3 {
		t.Fatalf("Len = %d", o.Len())
	}
	want, _ := reply.AppendBinary(nil)
	if dst, p := o.At(0); dst != a || !bytes.Equal(p, want) {
		t.Errorf("datagram 0 = %s %x", dst, p)
	}
	if dst, p := o.At(1); dst != b || !bytes.Equal(p, []byte{1, 2, 3}) {
		t.Errorf("datagram 1 = %s %x", dst, p)
	}
	if _, p := o.At(2); lisp.Verify(p, []byte("k")) != nil {
		t.Error("datagram 2 does not verify")
	}
	o.Reset()
	if o.Len() != 0 {
		t.Fatal("Reset left datagrams")
	}
	if n := testing.AllocsPerRun(100, func() {
		o.Reset()
		if err := o.AppendMessage(a, reply); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a reused outbox allocated %.1f times per message", n)
	}
}
