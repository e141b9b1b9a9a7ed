package xtr

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// Map-Register nonces are the time of sending and only increase: over
// map-servers in the same instant, retries, rounds and a restart.
func TestRegisterNoncesIncrease(t *testing.T) {
	h := newHarness(t, siteConfig)
	var last uint64
	check := func(what string) {
		t.Helper()
		for _, s := range h.net.take() {
			n := s.msg.(*lisp.MapRegister).Nonce
			if n <= last {
				t.Errorf("%s: nonce %#x after %#x", what, n, last)
			}
			if at := control.NonceTime(n); at.Sub(h.now).Abs() > time.Second {
				t.Errorf("%s: nonce of %s, sent at %s", what, at, h.now)
			}
			last = n
		}
	}
	h.x.Tick() // one to each map-server, in the same instant
	check("first round")
	h.now = h.now.Add(time.Second)
	h.x.Tick()
	check("retry")
	h.now = h.now.Add(time.Minute)
	h.x.Tick()
	check("next round")

	restarted := newHarness(t, siteConfig)
	restarted.now = h.now.Add(time.Second)
	restarted.x.Tick()
	h.net, h.now = restarted.net, restarted.now
	check("after a restart")
}

func TestMergeBit(t *testing.T) {
	for _, merge := range []bool{false, true} {
		cfg := siteConfig
		if merge {
			cfg = strings.Replace(cfg, "  site-id: 7\n", "  site-id: 7\n  merge: true\n", 1)
		}
		h := newHarness(t, cfg)
		h.x.Tick()
		if m := h.registers(t)[msA].msg.(*lisp.MapRegister); m.MergeRequest != merge {
			t.Errorf("merge: %v: Map-Register %s", merge, m)
		}
	}
}

// mergedNotify is the Map-Notify a map-server sends the xTRs of a merged
// registration: its own nonce, the merged record of one of the site's
// prefixes, the xTR's xTR-ID.
func mergedNotify(t *testing.T, nonce uint64, eid string, xtrID *lisp.XTRID, keyID uint8, alg lisp.AuthAlgorithm, key string) *lisp.MapNotify {
	t.Helper()
	p := netip.MustParsePrefix(eid)
	return &lisp.MapNotify{Nonce: nonce, Auth: lisp.Auth{KeyID: keyID, Algorithm: alg}, XTRID: xtrID,
		Records: []lisp.MapRecord{{TTL: 10, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()), Locators: []lisp.Locator{
			{Priority: 1, Weight: 60, Reachable: true, Address: lisp.IPAddress(rloc)},
			{Priority: 1, Weight: 40, Reachable: true, Address: lisp.MustParseAddress("203.0.113.9")},
		}}}}
}

func sign(t *testing.T, m interface {
	AppendSigned(b, key []byte) ([]byte, error)
}, key string) []byte {
	t.Helper()
	b, err := m.AppendSigned(nil, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Map-Notify of the site's merged locators, which acknowledges no
// Map-Register, is answered with a Map-Notify-Ack of the same nonce,
// records and xTR-ID, signed with the map-server's key, sent to the
// map-server; it does not acknowledge a registration round. Anything
// that is not one is refused and not answered.
func TestUnsolicitedNotifyAcknowledged(t *testing.T) {
	h := newHarness(t, siteConfig)
	h.x.Tick()
	h.registers(t)
	id := &lisp.XTRID{ID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SiteID: 7}
	var out control.Outbox
	for _, bad := range []struct {
		name string
		raw  []byte
		want NotifyResult
	}{
		{"unauthenticated", sign(t, mergedNotify(t, 0xabc, "10.1.0.0/16", id, 3, lisp.AuthNone, ""), ""), NotifyUnknownNonce},
		{"wrong key", sign(t, mergedNotify(t, 0xabc, "10.1.0.0/16", id, 3, lisp.AuthHMACSHA256, keyB), keyB), NotifyUnknownNonce},
		{"another xTR-ID", sign(t, mergedNotify(t, 0xabc, "10.1.0.0/16", &lisp.XTRID{ID: [16]byte{9}, SiteID: 7}, 3, lisp.AuthHMACSHA256, keyA), keyA), NotifyUnknownNonce},
		{"no xTR-ID", sign(t, mergedNotify(t, 0xabc, "10.1.0.0/16", nil, 3, lisp.AuthHMACSHA256, keyA), keyA), NotifyUnknownNonce},
		{"another prefix", sign(t, mergedNotify(t, 0xabc, "10.9.0.0/16", id, 3, lisp.AuthHMACSHA256, keyA), keyA), NotifyUnknownNonce},
		{"no records", sign(t, &lisp.MapNotify{Nonce: 0xabc, Auth: lisp.Auth{KeyID: 3, Algorithm: lisp.AuthHMACSHA256}, XTRID: id}, keyA), NotifyUnknownNonce},
	} {
		before := h.x.Counters().Notifies[bad.want]
		h.x.HandleNotify(bad.raw, msA, &out)
		if h.x.Counters().Notifies[bad.want] != before+1 || out.Len() != 0 {
			t.Errorf("%s: not refused as %s, or answered", bad.name, bad.want)
		}
	}

	// Map-server b's key, sent from another address: the ack goes to b.
	n := mergedNotify(t, 0xabc, "10.1.2.0/24", id, 0, lisp.AuthHMACSHA1, keyB)
	h.x.HandleNotify(sign(t, n, keyB), netip.MustParseAddrPort("198.51.100.77:4342"), &out)
	if out.Len() != 1 {
		t.Fatalf("%d datagrams, want the Map-Notify-Ack", out.Len())
	}
	dst, b := out.At(0)
	if dst != msB || lisp.Verify(b, []byte(keyB)) != nil {
		t.Fatalf("ack to %s, verifies with b's key: %v", dst, lisp.Verify(b, []byte(keyB)))
	}
	var a lisp.MapNotifyAck
	if err := a.DecodeFromBytes(b); err != nil {
		t.Fatal(err)
	}
	if a.Nonce != n.Nonce || a.Auth.KeyID != 0 || a.Auth.Algorithm != lisp.AuthHMACSHA1 || *a.XTRID != *id ||
		len(a.Records) != 1 || len(a.Records[0].Locators) != 2 {
		t.Errorf("ack %s, want the Map-Notify's fields", &a)
	}
	st := h.x.Status()
	if sb := st.MapServers[1]; sb.Unsolicited != 1 || !sb.LastUnsolicited.Equal(h.now) || sb.State != "registering" {
		t.Errorf("map-server b: %+v, want one merged-locator Map-Notify, the round still awaiting its own", sb)
	}
	if c := h.x.Counters(); c.Notifies[NotifyUnsolicited] != 1 || c.Notifies[NotifyAccepted] != 0 {
		t.Errorf("counters %v", c.Notifies)
	}
}
