package mapserver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// The te role's sets go to the ETRs of a prefix that answer for
// themselves, signed with the site's key and with their xTR-ID, again
// until acknowledged; a newer push replaces one not acknowledged; ETRs
// that asked for proxy replies get none.
func TestPushToETRs(t *testing.T) {
	h := &mergeHarness{replayHarness: newReplayHarness(t)}
	for src, proxy := range map[netip.AddrPort]bool{etr1: false, etr2: true} {
		id := byte(1)
		if proxy {
			id = 2
		}
		if r := h.send(register(t, &lisp.MapRegister{ProxyReply: proxy, MergeRequest: true, XTRID: &lisp.XTRID{ID: [16]byte{id}},
			Records: []lisp.MapRecord{record("10.1.0.0/16", lisp.MustParseAddress(src.Addr().String()))}}, "key-a"), src); r != Accepted {
			t.Fatalf("register from %s: %s", src, r)
		}
	}
	h.out.Reset()
	eid, ml := control.SourceDestAddress(0, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.1.0.0/16"))
	rec := lisp.MapRecord{TTL: 5, EID: eid, MaskLen: ml, Locators: []lisp.Locator{{Priority: 1, Reachable: true, Address: lisp.MustParseAddress("192.0.2.7")}}}
	key := mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/16"))
	if n := h.s.Push(key, []lisp.MapRecord{rec}, &h.net); n != 1 {
		t.Fatalf("pushed to %d ETRs, want the one without proxy replies", n)
	}
	out := h.net.take()
	if len(out) != 1 || out[0].dst != etr1 {
		t.Fatalf("sent %v", out)
	}
	n := h.notifies(out)[0]
	if n.XTRID == nil || n.XTRID.ID[0] != 1 || len(n.Records) != 1 || !n.Records[0].EID.Equal(eid) {
		t.Errorf("push %s", n)
	}
	// A newer push replaces the first: only it is sent again.
	h.s.Push(key, []lisp.MapRecord{rec, rec}, &h.net)
	newer := h.notifies(h.net.take())[0]
	h.clk.advance(notifyInterval)
	h.s.NotifyDue(&h.net)
	pushes := 0
	for _, m := range h.notifies(h.net.take()) { // and the merged locators' Map-Notify
		switch m.Nonce {
		case n.Nonce:
			t.Error("the replaced push sent again")
		case newer.Nonce:
			pushes++
		}
	}
	if pushes != 1 {
		t.Fatalf("the newer push sent again %d times", pushes)
	}
	h.s.HandleNotifyAck(ack(t, newer, "key-a"), etr1)
	h.clk.advance(time.Minute)
	h.s.NotifyDue(&h.net)
	for _, m := range h.notifies(h.net.take()) {
		if m.Nonce == newer.Nonce {
			t.Error("sent again after the ack")
		}
	}
	if c := h.s.Counters(); c.Pushes != 2 || c.Acks[AckAccepted] != 1 || c.Unacknowledged != 0 {
		t.Errorf("counters %+v", c)
	}
	if n := h.s.Push(mapping.NewEID(0, netip.MustParsePrefix("10.9.0.0/16")), []lisp.MapRecord{rec}, &h.net); n != 0 {
		t.Errorf("pushed %d for a prefix nobody registered", n)
	}
}

// Sets that do not fit one datagram go in several Map-Notifies, each
// within maxNotifyLen once signed.
func TestPushSplits(t *testing.T) {
	h := &mergeHarness{replayHarness: newReplayHarness(t)}
	if r := h.send(register(t, &lisp.MapRegister{Records: []lisp.MapRecord{record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"))}}, "key-a"), etr1); r != Accepted {
		t.Fatal(r)
	}
	elp := &lisp.ELP{}
	for i := range 8 {
		elp.Hops = append(elp.Hops, lisp.ELPHop{Address: lisp.IPAddress(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})), RLOCProbe: true, Strict: true})
	}
	var records []lisp.MapRecord
	for i := range 12 {
		eid, ml := control.SourceDestAddress(0, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, byte(i), 0}), 24), netip.MustParsePrefix("10.1.0.0/16"))
		rec := lisp.MapRecord{TTL: 5, EID: eid, MaskLen: ml}
		for range 8 {
			rec.Locators = append(rec.Locators, lisp.Locator{Priority: 1, Reachable: true, Address: lisp.LCAFAddress(elp)})
		}
		records = append(records, rec)
	}
	h.s.Push(mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/16")), records, &h.net)
	out := h.net.take()
	got := 0
	for _, n := range h.notifies(out) {
		got += len(n.Records)
	}
	if len(out) < 2 || got != len(records) {
		t.Fatalf("%d Map-Notifies with %d records, want several with all %d", len(out), got, len(records))
	}
	for _, o := range out {
		if len(o.b) > maxNotifyLen {
			t.Errorf("a Map-Notify of %d bytes", len(o.b))
		}
	}
}
