package mapcache

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// Once a Map-Request is given up, a reply to any of its tries is
// unsolicited: nothing is installed.
func TestReplyAfterGivingUpRefused(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	for range 3 { // two retries, then given up
		h.clk.advance(time.Second)
		h.c.Tick()
	}
	h.net.take()
	if c := h.c.Counters(); c.Failed != 1 {
		t.Fatalf("counters %+v, want the request given up", c)
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, resolverA)
	if _, ok := h.dp.get(key("10.1.0.0/16")); ok {
		t.Error("the reply to a request given up was installed")
	}
	if c := h.c.Counters(); c.Unsolicited != 1 || c.Replies != 0 {
		t.Errorf("counters %+v", c)
	}
}
