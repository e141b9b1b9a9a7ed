package resolver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// A cold resolution walks root, child node and map-server; the
// referrals are cached, so the next EID under the same map-server goes
// to it straight away.
func TestDDTResolveColdThenWarm(t *testing.T) {
	n := newDDTNet(t, "")
	n.request("10.1.0.7", 1)
	reply := n.lastReply(1)
	if len(reply.Records) != 1 || reply.Records[0].Locators[0].Address.String() != "198.51.100.200" {
		t.Fatalf("ITR got %s, want the map-server's proxy reply", reply)
	}
	c := n.counters()
	if c.Sent != 3 || c.Referrals[lisp.ReferralNode] != 1 || c.Referrals[lisp.ReferralMS] != 1 || c.Referrals[lisp.ReferralMSAck] != 1 ||
		c.Resolved != 1 || c.Pending != 0 {
		t.Errorf("cold: %+v", c)
	}
	// 10.1.0.0/16 (node), 10.1.0.0/17 (map-servers) and the MS-ACK's
	// 10.1.0.0/24, with the complete peer set.
	if c.CacheEntries != 3 {
		t.Errorf("%d referral cache entries, want 3: %+v", c.CacheEntries, n.r.DDTStatus().Referrals)
	}

	n.request("10.1.0.8", 2)
	n.lastReply(2)
	if c := n.counters(); c.Sent != 4 || c.CachePositive != 1 {
		t.Errorf("warm: %d DDT Map-Requests in all, %d from the cache: want one more, straight to a map-server", c.Sent, c.CachePositive)
	}
	// Under 10.1.128.0/17 the cached 10.1.0.0/16 node is the start.
	n.request("10.1.128.9", 3)
	n.lastReply(3)
	if c := n.counters(); c.Sent != 6 || c.CachePositive != 2 {
		t.Errorf("%d DDT Map-Requests in all, %d from the cache: want two more (eu, then the map-server)", c.Sent, c.CachePositive)
	}
}

// The DDT Map-Requests to map-servers carry the M bit, those to DDT
// nodes do not; all carry D.
func TestDDTMapServerBit(t *testing.T) {
	n := newDDTNet(t, "")
	var toMS, toNodes int
	n.r.ddt.send = control.SenderFunc(func(netip.AddrPort, []byte) error { return nil })
	orig := n.nodes
	n.nodes = map[netip.Addr]authority{}
	for a, h := range orig {
		n.nodes[a] = spy{h, func(e *lisp.ECM) {
			if a.As4()[3] > 100 {
				toMS++
				if !e.ToMS {
					t.Errorf("to map-server %s without M", a)
				}
			} else {
				toNodes++
				if e.ToMS {
					t.Errorf("to DDT node %s with M", a)
				}
			}
		}}
	}
	n.request("10.2.0.1", 1)
	if toMS != 1 || toNodes != 2 {
		t.Errorf("%d to map-servers, %d to nodes", toMS, toNodes)
	}
}

type spy struct {
	authority
	saw func(*lisp.ECM)
}

func (s spy) HandleECM(raw []byte, e *lisp.ECM, src netip.AddrPort, out *control.Outbox) {
	s.saw(e)
	s.authority.HandleECM(raw, e, src, out)
}

// A delegation hole is answered negatively with the hole's prefix and
// TTL, and cached: the next EID in the hole is answered at once.
func TestDDTHole(t *testing.T) {
	n := newDDTNet(t, "")
	n.request("10.3.0.1", 1)
	rec := n.lastReply(1).Records[0]
	if len(rec.Locators) != 0 || rec.Action != lisp.ActionNativelyForward || rec.TTL != 15 ||
		rec.EID.String() != "10.3.0.0" || rec.MaskLen != 16 {
		t.Fatalf("ITR got %s, want a negative reply for the hole 10.3.0.0/16, 15 minutes", rec.String())
	}
	sent := n.counters().Sent
	n.wait(5 * time.Minute)
	n.request("10.3.200.1", 2)
	rec = n.lastReply(2).Records[0]
	if c := n.counters(); c.Sent != sent || c.CacheNegative != 1 || rec.TTL != 10 || rec.MaskLen != 16 {
		t.Errorf("cached hole: %d more DDT requests, %d negatives from the cache, TTL %d: want 0, 1, the 10 minutes left",
			c.Sent-sent, c.CacheNegative, rec.TTL)
	}
	n.wait(11 * time.Minute)
	if c := n.counters(); c.Expired != 1 || c.CacheEntries != 0 {
		t.Errorf("after its TTL: %d expired, %d entries", c.Expired, c.CacheEntries)
	}
	n.request("10.3.200.1", 3)
	if c := n.counters(); c.Sent != sent+1 {
		t.Errorf("after expiry the root is asked again: %d requests more", c.Sent-sent)
	}
}

// A root RLOC that does not answer costs one timeout: the other RLOC of
// the set is asked, and the dead one is asked last from then on.
func TestDDTKilledNode(t *testing.T) {
	n := newDDTNet(t, "")
	n.dead[addr("192.0.2.1")], n.dead[addr("192.0.2.2")] = true, true
	n.request("10.2.0.1", 1)
	var first, second netip.Addr = addr("192.0.2.1"), addr("192.0.2.2")
	if n.asked[first] == 0 {
		first, second = second, first
	}
	if n.asked[first] != 1 || n.asked[second] != 0 || len(n.toITR) != 0 {
		t.Fatalf("asked %v", n.asked)
	}
	n.dead[second] = false
	n.wait(400 * time.Millisecond)
	if n.asked[second] != 0 {
		t.Fatalf("the second RLOC asked before the 500ms timeout")
	}
	n.wait(100 * time.Millisecond)
	n.lastReply(1)
	if c := n.counters(); c.Timeouts != 1 || n.asked[second] != 1 {
		t.Errorf("%d timeouts, asked %v", c.Timeouts, n.asked)
	}
	if st := n.r.DDTStatus(); !st.Root[0].Down && !st.Root[1].Down {
		t.Errorf("no root RLOC down in the status: %+v", st.Root)
	}
	// The next request skips the dead RLOC.
	n.request("10.3.0.1", 2)
	n.lastReply(2)
	if n.asked[first] != 1 || n.asked[second] != 2 {
		t.Errorf("asked %v: the dead RLOC again", n.asked)
	}
	// After the holddown it is up again: with the other RLOC dead now,
	// it answers, whether it is asked first or after a timeout.
	n.dead[first], n.dead[second] = false, true
	n.wait(nodeHolddown)
	if st := n.r.DDTStatus(); st.Root[0].Down || st.Root[1].Down {
		t.Errorf("a root RLOC still down after the holddown: %+v", st.Root)
	}
	n.request("10.64.0.1", 3)
	n.wait(500 * time.Millisecond)
	n.lastReply(3)
	if n.asked[first] != 2 {
		t.Errorf("asked %v: the RLOC that came back was not asked again", n.asked)
	}
}

// With every RLOC of a set dead, the request is given up after each had
// its tries, and the ITR gets nothing.
func TestDDTExhausted(t *testing.T) {
	n := newDDTNet(t, "    request-tries: 2\n")
	n.dead[addr("192.0.2.11")], n.dead[addr("192.0.2.12")] = true, true
	n.request("10.1.0.7", 1)
	for range 5 {
		n.wait(500 * time.Millisecond)
	}
	c := n.counters()
	if c.Exhausted != 1 || c.Timeouts != 4 || c.Pending != 0 || len(n.toITR) != 0 ||
		n.asked[addr("192.0.2.11")] != 2 || n.asked[addr("192.0.2.12")] != 2 {
		t.Errorf("counters %+v, asked %v, ITR got %d replies", c, n.asked, len(n.toITR))
	}
}

// MS-NOT-REGISTERED from one map-server sends the request to the next
// of the set; when all say so, the ITR gets a negative reply for a
// minute, which is cached.
func TestDDTNotRegistered(t *testing.T) {
	n := newDDTNet(t, "")
	peers := "\n  ddt: {authoritative-prefixes: [{prefix: 10.1.0.0/17}], peers: [192.0.2.101, 192.0.2.102]}\n"
	n.mapServer("192.0.2.101", "10.1.0.0/17", peers, "")
	n.request("10.1.0.7", 1)
	n.lastReply(1)
	if c := n.counters(); c.Referrals[lisp.ReferralMSNotRegistered] > 1 || c.Resolved != 1 {
		t.Errorf("one map-server has it: %+v", c)
	}
	n.mapServer("192.0.2.102", "10.1.0.0/17", peers, "")
	n.request("10.1.1.1", 2)
	rec := n.lastReply(2).Records[0]
	if len(rec.Locators) != 0 || rec.TTL != 1 || rec.EID.String() != "10.1.0.0" || rec.MaskLen != 17 {
		t.Errorf("ITR got %s, want a negative reply for 10.1.0.0/17, 1 minute", rec.String())
	}
	if c := n.counters(); c.Referrals[lisp.ReferralMSNotRegistered] < 2 || n.asked[addr("192.0.2.101")] < 1 || n.asked[addr("192.0.2.102")] < 1 {
		t.Errorf("both map-servers asked once: %+v, %v", c, n.asked)
	}
	sent := n.counters().Sent
	n.request("10.1.2.2", 3)
	if c := n.counters(); c.Sent != sent || c.CacheNegative != 1 {
		t.Errorf("the not-registered prefix is cached: %d more requests", c.Sent-sent)
	}
}

// A map-server that stops being authoritative answers NOT-AUTHORITATIVE:
// the cached referral to it is dropped and the tree asked again from the
// root, which now refers elsewhere.
func TestDDTStaleReferral(t *testing.T) {
	n := newDDTNet(t, "")
	n.request("10.1.128.9", 1)
	n.lastReply(1)
	// 10.1.128.0/17 moves from 192.0.2.103 to 192.0.2.104.
	n.mapServer("192.0.2.103", "10.200.0.0/16", "", "")
	n.node(`
authoritative-prefixes: [{prefix: 10.1.0.0/16}]
delegations:
  - {prefix: 10.1.0.0/17, type: map-server, referrals: [192.0.2.101, 192.0.2.102]}
  - {prefix: 10.1.128.0/17, type: map-server, referrals: [192.0.2.104]}
`, "192.0.2.11", "192.0.2.12")
	n.mapServer("192.0.2.104", "10.1.128.0/17", "", "10.1.128.0/24")
	n.request("10.1.128.10", 2)
	n.lastReply(2)
	if c := n.counters(); c.Stale != 1 || c.Referrals[lisp.ReferralNotAuthoritative] != 1 || n.asked[addr("192.0.2.104")] != 1 {
		t.Errorf("counters %+v, asked %v", c, n.asked)
	}
	// Not authoritative at the root itself: a negative reply, TTL 0.
	n.request("192.0.2.77", 3)
	if rec := n.lastReply(3).Records[0]; rec.TTL != 0 || rec.MaskLen != 32 || len(rec.Locators) != 0 {
		t.Errorf("outside the root's authority: %s", rec.String())
	}
}

// A referral no more specific than the one followed is a loop: refused,
// counted, the request abandoned. A chain longer than max-referrals too.
func TestDDTLoop(t *testing.T) {
	n := newDDTNet(t, "    max-referrals: 2\n")
	// us delegates 10.2.0.0/16 to itself: a loop at the same prefix.
	n.node(`
authoritative-prefixes: [{prefix: 10.2.0.0/16}]
delegations: [{prefix: 10.2.0.0/16, referrals: [192.0.2.21]}]
`, "192.0.2.21")
	n.request("10.2.0.1", 1)
	if c := n.counters(); c.Refused[RefusedLoop] != 1 || c.Pending != 0 || len(n.toITR) != 0 {
		t.Errorf("loop: %+v, ITR got %d replies", c, len(n.toITR))
	}
	// A chain of ever more specific referrals, each to the next node,
	// from the cached 10.2.0.0/16: the third is one too many.
	n.node(`
authoritative-prefixes: [{prefix: 10.2.0.0/16}]
delegations: [{prefix: 10.2.0.0/17, referrals: [192.0.2.22]}]
`, "192.0.2.21")
	n.node(`
authoritative-prefixes: [{prefix: 10.2.0.0/17}]
delegations: [{prefix: 10.2.0.0/18, referrals: [192.0.2.23]}]
`, "192.0.2.22")
	n.node(`
authoritative-prefixes: [{prefix: 10.2.0.0/18}]
delegations: [{prefix: 10.2.0.0/19, referrals: [192.0.2.24]}]
`, "192.0.2.23")
	n.request("10.2.0.1", 2)
	if c := n.counters(); c.Refused[RefusedTooManyReferrals] != 1 || c.Pending != 0 || n.asked[addr("192.0.2.24")] != 0 {
		t.Errorf("too many referrals: %+v, asked %v", c, n.asked)
	}
}

// Map-Referrals that are malformed, unsolicited, from elsewhere, or say
// nonsense are refused and counted by reason, and the request keeps
// waiting for a good answer.
func TestDDTRefusedReferrals(t *testing.T) {
	n := newDDTNet(t, "")
	n.dead[addr("192.0.2.1")], n.dead[addr("192.0.2.2")] = true, true
	n.request("10.1.0.7", 9)
	asked := addr("192.0.2.1")
	if n.asked[asked] == 0 {
		asked = addr("192.0.2.2")
	}
	from := netip.AddrPortFrom(asked, 4342)
	referral := func(rec lisp.ReferralRecord) []byte {
		b, err := (&lisp.MapReferral{Nonce: 9, Records: []lisp.ReferralRecord{rec}}).AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := []lisp.Locator{{Reachable: true, Address: lisp.MustParseAddress("192.0.2.11")}}
	good := lisp.ReferralRecord{TTL: 1440, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16, Action: lisp.ReferralNode, Referrals: set}
	noRecords, _ := (&lisp.MapReferral{Nonce: 9}).AppendBinary(nil)
	unsolicited, _ := (&lisp.MapReferral{Nonce: 10, Records: []lisp.ReferralRecord{good}}).AppendBinary(nil)
	other := good
	other.EID, other.MaskLen = lisp.MustParseAddress("10.2.0.0"), 16
	empty := good
	empty.Referrals = nil
	unknown := good
	unknown.Action = 7
	name := good
	name.EID, name.MaskLen = lisp.NameAddress("ten"), 24
	for _, tc := range []struct {
		name string
		b    []byte
		from netip.AddrPort
		want RefusedReason
	}{
		{"malformed", referral(good)[:20], from, RefusedMalformed},
		{"unsolicited", unsolicited, from, RefusedUnsolicited},
		{"unexpected source", referral(good), netip.MustParseAddrPort("192.0.2.66:4342"), RefusedUnexpectedSource},
		{"no records", noRecords, from, RefusedNoRecords},
		{"unsupported EID", referral(name), from, RefusedUnsupportedEID},
		{"not covering", referral(other), from, RefusedNotCovering},
		{"empty set", referral(empty), from, RefusedEmptySet},
		{"unknown action", referral(unknown), from, RefusedUnknownAction},
	} {
		var out control.Outbox
		n.r.HandleReferral(tc.b, tc.from, &out)
		if c := n.counters(); c.Refused[tc.want] != 1 || out.Len() != 0 || c.Pending != 1 {
			t.Errorf("%s: refused %v, %d datagrams sent, %d pending", tc.name, c.Refused, out.Len(), c.Pending)
		}
	}
	// The good one is still followed.
	var out control.Outbox
	n.r.HandleReferral(referral(good), from, &out)
	n.deliver(resolverRLOC, &out)
	n.lastReply(9)
}

// The local map-server answers for its sites; only what it knows
// nothing of goes to the DDT.
func TestDDTWithLocalMapServer(t *testing.T) {
	n := newDDTNet(t, "")
	r := New(n.r.cfgForTest(), testDB(), nil)
	r.ddt = n.r.ddt
	n.r = r
	n.request("10.1.0.1", 1) // in testDB: a proxy reply, locally
	if rec := n.lastReply(1).Records[0]; len(rec.Locators) != 1 || rec.Locators[0].Address.String() != "192.0.2.50" {
		t.Errorf("local answer: %s", rec.String())
	}
	if c := n.counters(); c.Requests != 0 {
		t.Errorf("%d requests through DDT for a local EID", c.Requests)
	}
	n.request("10.2.0.1", 2) // forwarded to testDB's ETR, also local
	n.request("10.200.0.1", 3)
	if c := n.counters(); c.Requests != 1 || n.lastReply(3).Records[0].MaskLen != 9 {
		t.Errorf("through DDT: %d requests, want the one no site holds", c.Requests)
	}
}

func (r *Resolver) cfgForTest() *config.MapResolver { return &cfgNoLimit }
