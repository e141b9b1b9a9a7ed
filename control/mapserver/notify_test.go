package mapserver

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// sends records what NotifyDue sends.
type sends struct {
	mu  sync.Mutex
	out []sentNotify
}

type sentNotify struct {
	dst netip.AddrPort
	b   []byte
}

func (s *sends) Send(dst netip.AddrPort, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = append(s.out, sentNotify{dst, append([]byte(nil), b...)})
	return nil
}

func (s *sends) take() []sentNotify {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.out
	s.out = nil
	return out
}

// mergeHarness has ETRs of site a register parts of 10.1.0.0/16 with
// the merge bit.
type mergeHarness struct {
	*replayHarness
	net sends
}

func (h *mergeHarness) part(src netip.AddrPort, id byte, rlocs ...string) {
	h.t.Helper()
	var addrs []lisp.Address
	for _, r := range rlocs {
		addrs = append(addrs, lisp.MustParseAddress(r))
	}
	if r := h.send(register(h.t, &lisp.MapRegister{ProxyReply: true, MergeRequest: true,
		XTRID:   &lisp.XTRID{ID: [16]byte{id}, SiteID: 1},
		Records: []lisp.MapRecord{record("10.1.0.0/16", addrs...)}}, "key-a"), src); r != Accepted {
		h.t.Fatalf("part of xTR %d: %s", id, r)
	}
}

// notifies decodes the Map-Notifies of out, checking that each verifies
// with site a's key.
func (h *mergeHarness) notifies(out []sentNotify) []*lisp.MapNotify {
	h.t.Helper()
	var ns []*lisp.MapNotify
	for _, o := range out {
		if err := lisp.Verify(o.b, []byte("key-a")); err != nil {
			h.t.Fatalf("Map-Notify to %s does not verify: %v", o.dst, err)
		}
		var n lisp.MapNotify
		if err := n.DecodeFromBytes(o.b); err != nil {
			h.t.Fatal(err)
		}
		ns = append(ns, &n)
	}
	return ns
}

func (h *mergeHarness) queued() []sentNotify {
	var out []sentNotify
	for i := range h.out.Len() {
		dst, b := h.out.At(i)
		out = append(out, sentNotify{dst, append([]byte(nil), b...)})
	}
	return out
}

func ack(t *testing.T, n *lisp.MapNotify, key string) []byte {
	t.Helper()
	a := lisp.MapNotifyAck{MapNotify: *n}
	b, err := a.AppendSigned(nil, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// When an ETR's part changes the merged locators, the other ETRs of the
// merge get an unsolicited, authenticated Map-Notify of the merged record,
// sent again 3 s apart until a Map-Notify-Ack with its nonce and key
// comes.
func TestMergedChangeNotifiesTheOthers(t *testing.T) {
	h := &mergeHarness{replayHarness: newReplayHarness(t)}
	h.part(etr1, 1, "192.0.2.1")
	if h.out.Len() != 0 {
		t.Fatal("a Map-Notify for the first part")
	}
	h.part(etr2, 2, "192.0.2.2")
	out := h.queued()
	if len(out) != 1 || out[0].dst != etr1 {
		t.Fatalf("sent %v, want a Map-Notify to ETR 1", out)
	}
	n := h.notifies(out)[0]
	var locs []string
	for _, l := range n.Records[0].Locators {
		locs = append(locs, l.Address.String())
	}
	if !slices.Equal(locs, []string{"192.0.2.1", "192.0.2.2"}) || n.XTRID == nil || n.XTRID.ID[0] != 1 || n.Records[0].TTL != 3 {
		t.Errorf("Map-Notify %s, want the merged locators, ETR 1's xTR-ID and TTL", n)
	}
	etrs := h.s.Status().Sites[0].Registrations[0].ETRs
	if etrs[0].Unacknowledged == nil || etrs[0].Unacknowledged.Sends != 1 || etrs[1].Unacknowledged != nil {
		t.Errorf("status %+v %+v", etrs[0].Unacknowledged, etrs[1].Unacknowledged)
	}

	// A refresh that changes nothing tells nobody.
	h.part(etr2, 2, "192.0.2.2")
	if h.out.Len() != 0 {
		t.Error("a Map-Notify for a refresh")
	}

	h.clk.advance(notifyInterval - time.Millisecond)
	h.s.NotifyDue(&h.net)
	if len(h.net.take()) != 0 {
		t.Fatal("sent again before the interval")
	}
	h.clk.advance(time.Millisecond)
	h.s.NotifyDue(&h.net)
	if again := h.net.take(); len(again) != 1 || again[0].dst != etr1 || string(again[0].b) != string(out[0].b) {
		t.Fatalf("retransmission %v, want the same Map-Notify", again)
	}

	for _, bad := range []struct {
		raw  []byte
		want AckResult
	}{
		{ack(t, n, "key-b"), AckAuthFailed},
		{ack(t, &lisp.MapNotify{Nonce: n.Nonce ^ 1, Auth: n.Auth, Records: n.Records}, "key-a"), AckUnknownNonce},
		{[]byte{0x50, 0, 0}, AckMalformed},
	} {
		h.s.HandleNotifyAck(bad.raw, etr1)
		if got := h.s.Counters().Acks[bad.want]; got != 1 {
			t.Errorf("ack not refused as %s", bad.want)
		}
	}
	h.s.HandleNotifyAck(ack(t, n, "key-a"), etr1)
	h.clk.advance(time.Minute)
	h.s.NotifyDue(&h.net)
	if len(h.net.take()) != 0 {
		t.Error("sent again after the ack")
	}
	c := h.s.Counters()
	if c.Acks[AckAccepted] != 1 || c.Unsolicited != 1 || c.Retransmits != 1 || c.Unacknowledged != 0 {
		t.Errorf("counters %+v", c)
	}
	if etrs := h.s.Status().Sites[0].Registrations[0].ETRs; etrs[0].Unacknowledged != nil {
		t.Errorf("still unacknowledged: %+v", etrs[0].Unacknowledged)
	}
}

// Unacknowledged, a Map-Notify is sent 7 times: 3 s apart, then 6, 12,
// 24 s; 48 s after the last, it is given up.
func TestMergeNotifyBacksOffAndGivesUp(t *testing.T) {
	h := &mergeHarness{replayHarness: newReplayHarness(t)}
	h.part(etr1, 1, "192.0.2.1")
	h.part(etr2, 2, "192.0.2.2")
	start := h.clk.t
	var at []time.Duration
	for range 120 {
		h.clk.advance(time.Second)
		h.s.NotifyDue(&h.net)
		for range h.net.take() {
			at = append(at, h.clk.t.Sub(start))
		}
	}
	want := []time.Duration{3, 6, 9, 15, 27, 51}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(at, want) {
		t.Errorf("retransmitted at %v, want %v", at, want)
	}
	c := h.s.Counters()
	if c.Unsolicited != 1 || c.Retransmits != 6 || c.Unacknowledged != 1 {
		t.Errorf("counters %+v", c)
	}
	if len(h.s.notifying) != 0 || h.s.notifies.Len() != 0 {
		t.Error("state left behind")
	}
}

// When an ETR of the merge expires or leaves, the others are told at the
// next NotifyDue; a Map-Notify for an ETR that left is forgotten.
func TestMergeNotifyOnExpiryAndDeparture(t *testing.T) {
	h := &mergeHarness{replayHarness: newReplayHarness(t)}
	h.part(etr1, 1, "192.0.2.1")
	h.clk.advance(time.Minute)
	h.part(etr2, 2, "192.0.2.2") // tells ETR 1
	h.clk.advance(2*time.Minute + time.Second)
	if n := h.s.Expire(); n != 1 { // ETR 1: 3 minutes
		t.Fatalf("expired %d", n)
	}
	if len(h.s.notifying) != 1 {
		t.Fatalf("%d Map-Notifies pending, want ETR 2's only", len(h.s.notifying))
	}
	h.s.NotifyDue(&h.net)
	out := h.net.take()
	if len(out) != 1 || out[0].dst != etr2 {
		t.Fatalf("sent %v, want ETR 2 told", out)
	}
	if n := h.notifies(out)[0]; len(n.Records[0].Locators) != 1 || n.XTRID.ID[0] != 2 {
		t.Errorf("Map-Notify %s, want ETR 2's part alone", n)
	}
	// ETR 2 de-registers: nothing is left to tell, nothing pending.
	h.clk.advance(time.Second)
	rec := record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.2"))
	rec.TTL = 0
	h.send(register(t, &lisp.MapRegister{MergeRequest: true, XTRID: &lisp.XTRID{ID: [16]byte{2}, SiteID: 1},
		Records: []lisp.MapRecord{rec}}, "key-a"), etr2)
	if len(h.s.notifying) != 0 || h.s.notifies.Len() != 0 || h.s.Counters().Registrations != 0 {
		t.Errorf("after the last ETR left: %d pending", len(h.s.notifying))
	}
	h.s.HandleNotifyAck(ack(t, h.notifies(out)[0], "key-a"), etr2)
	if c := h.s.Counters(); c.Acks[AckUnknownNonce] != 1 {
		t.Errorf("a late ack: %v", c.Acks)
	}
}
