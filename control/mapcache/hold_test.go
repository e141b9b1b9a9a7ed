package mapcache

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// held is a packet of n bytes to eid that the ITR handed over.
func held(eid string, n int) dataplane.Held {
	return dataplane.HeldFrame(0, netip.MustParseAddr(eid), n)
}

func (h *harness) releasedPackets() []released {
	h.dp.mu.Lock()
	defer h.dp.mu.Unlock()
	return append([]released(nil), h.dp.released...)
}

// Packets to an EID without a mapping are held while one Map-Request is
// in flight; the reply's entry releases every held packet it covers, in
// the order they came, while the entry is installed as Hold (so that none
// of the site's new packets overtakes them), and then the entry is
// installed as it is.
func TestHoldReleasesInOrder(t *testing.T) {
	h := newHarness(t, oneResolver)
	for n := 100; n < 103; n++ {
		h.c.Hold(held("10.1.2.3", n))
	}
	_, _, req := h.request(t) // one request for the three
	h.c.Hold(held("10.1.9.9", 200))
	if _, _, other := h.request(t); other.Records[0].EID.IP() != netip.MustParseAddr("10.1.9.9") {
		t.Fatalf("second request for %s", other.Records[0].EID)
	}
	if got := h.releasedPackets(); len(got) != 0 {
		t.Fatalf("released before the reply: %+v", got)
	}
	c := h.c.Counters().Hold
	if c.Held != 4 || c.Now != 4 {
		t.Errorf("counters before the reply %+v", c)
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	got := h.releasedPackets()
	want := []released{
		{netip.MustParseAddr("10.1.2.3"), 100, dataplane.Hold},
		{netip.MustParseAddr("10.1.2.3"), 101, dataplane.Hold},
		{netip.MustParseAddr("10.1.2.3"), 102, dataplane.Hold},
		{netip.MustParseAddr("10.1.9.9"), 200, dataplane.Hold},
	}
	if len(got) != 4 || !reflect.DeepEqual(got[:3], want[:3]) || got[3] != want[3] {
		t.Errorf("released %+v\nwant %+v", got, want)
	}
	if e, ok := h.dp.get(key("10.1.0.0/16")); !ok || e.Action != dataplane.Encapsulate || len(e.Paths) != 1 {
		t.Errorf("entry after the release: %+v, %v", e, ok)
	}
	if c := h.c.Counters().Hold; c.Released != 4 || c.Now != 0 || c.Unresolved != 0 {
		t.Errorf("counters after the reply %+v", c)
	}
	// A packet the ITR handed over before it saw the entry goes at once.
	h.c.Hold(held("10.1.7.7", 300))
	if got := h.releasedPackets(); len(got) != 5 || got[4].n != 300 || got[4].action != dataplane.Encapsulate {
		t.Errorf("released %+v", got)
	}
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("asked again for a covered EID: %+v", out)
	}
}

// The bounds: per EID and in all; each packet beyond is dropped and
// counted, and the ones held still go.
func TestHoldBounds(t *testing.T) {
	h := newHarness(t, "map-cache: {map-resolvers: [192.0.2.100], hold-per-eid: 2, hold-total: 3}\n")
	for n := range 3 {
		h.c.Hold(held("10.1.2.3", 100+n))
	}
	for n := range 2 {
		h.c.Hold(held("10.2.0.1", 200+n))
	}
	c := h.c.Counters().Hold
	if c.Held != 3 || c.EIDFull != 1 || c.TotalFull != 1 || c.Now != 3 {
		t.Errorf("counters %+v", c)
	}
	out := h.net.take()
	if len(out) != 2 {
		t.Fatalf("%d requests, want one per EID", len(out))
	}
	req := out[0].msg.(*lisp.ECM).Message.(*lisp.MapRequest)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.0.0.0/8", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	if got := h.releasedPackets(); len(got) != 3 {
		t.Errorf("released %+v", got)
	}
}

// A negative reply applies its action to the held packets: released to
// be forwarded natively, or dropped.
func TestHoldNegativeReplies(t *testing.T) {
	for _, tc := range []struct {
		action   lisp.Action
		released bool
	}{
		{lisp.ActionNativelyForward, true},
		{lisp.ActionDrop, false},
		{lisp.ActionSendMapRequest, false},
	} {
		h := newHarness(t, oneResolver)
		h.c.Hold(held("172.16.0.1", 100))
		_, _, req := h.request(t)
		rec := record("172.0.0.0/8", 15)
		rec.Action = tc.action
		h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{rec}}, resolverA)
		got, c := h.releasedPackets(), h.c.Counters().Hold
		if tc.released && (len(got) != 1 || got[0].action != dataplane.NativelyForward || c.Released != 1) {
			t.Errorf("%s: released %+v, counters %+v", tc.action, got, c)
		}
		if !tc.released && (len(got) != 0 || c.Negative != 1) {
			t.Errorf("%s: released %+v, counters %+v", tc.action, got, c)
		}
		if c.Now != 0 {
			t.Errorf("%s: %d still held", tc.action, c.Now)
		}
	}
}

// What no reply resolves is dropped when its request ends: after its
// last try, or with a reply none of whose records covers it.
func TestHoldUnresolved(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Hold(held("10.1.2.3", 100))
	h.net.take()
	for range 3 {
		h.clk.advance(time.Second)
		h.c.Tick()
	}
	if c := h.c.Counters(); c.Failed != 1 || c.Hold.Unresolved != 1 || c.Hold.Now != 0 {
		t.Errorf("after the last try: %+v", c)
	}
	h.net.take() // the retries

	h.c.Hold(held("10.1.2.3", 100))
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.9.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	if c := h.c.Counters().Hold; c.Unresolved != 2 || c.Now != 0 || len(h.releasedPackets()) != 0 {
		t.Errorf("after a reply for another prefix: %+v", c)
	}
}

// A record of TTL 0 is used once: the held packets take its paths, and
// nothing stays installed.
func TestHoldZeroTTL(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Hold(held("10.1.2.3", 100))
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 0, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	if got := h.releasedPackets(); len(got) != 1 || got[0].action != dataplane.Hold {
		t.Errorf("released %+v", got)
	}
	if _, ok := h.dp.get(key("10.1.0.0/16")); ok || h.c.Counters().Entries != 0 {
		t.Error("an entry of TTL 0 stayed")
	}
}

// Without holding (miss is not hold), nothing is held.
func TestHoldOff(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.release = nil
	h.c.Hold(held("10.1.2.3", 100))
	if c := h.c.Counters(); c.Hold.Invalid != 1 || c.Hold.Held != 0 || c.Requests != 0 {
		t.Errorf("counters %+v", c)
	}
}
