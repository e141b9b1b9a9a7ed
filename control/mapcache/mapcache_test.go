package mapcache

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

func TestMissSendsEncapsulatedRequest(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	dst, ecm, req := h.request(t)
	if dst != resolverA {
		t.Errorf("sent to %s, want the map-resolver %s", dst, resolverA)
	}
	// The reply comes back to an ITR-RLOC, at the inner source port.
	if ecm.Source != netip.AddrPortFrom(rloc4, 4342) || ecm.Destination != netip.MustParseAddrPort("10.1.2.3:4342") {
		t.Errorf("inner header %s -> %s", ecm.Source, ecm.Destination)
	}
	if len(req.ITRRLOCs) != 2 || req.ITRRLOCs[0].IP() != rloc4 || req.ITRRLOCs[1].IP() != rloc6 ||
		req.Nonce == 0 || req.SMRInvoked || req.Probe || len(req.Records) != 1 ||
		req.Records[0].EID.IP() != netip.MustParseAddr("10.1.2.3") || req.Records[0].MaskLen != 32 {
		t.Errorf("Map-Request %s", req)
	}
	// Another miss for the same EID while the first is in flight: no
	// second request.
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("duplicate miss sent %d datagrams", len(out))
	}
	if c := h.c.Counters(); c.Requests != 1 || c.Deduplicated != 1 || c.Pending != 1 {
		t.Errorf("counters %+v", c)
	}
}

// The reply's locators become the entry's paths in order: a plain RLOC,
// a bare ELP with its bits (down while its Lookup hop, an EID, is looked
// up), an ELP inside an AFI List next to AFI 0 (as lispers.net sends
// it); a locator the data plane cannot use is skipped.
func TestReplyInstallsPathsInOrder(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{InstanceID: 1000, EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	if l, ok := req.Records[0].EID.LCAF().(*lisp.InstanceID); !ok || l.IID != 1000 {
		t.Fatalf("request EID %s, want instance 1000", req.Records[0].EID)
	}
	elp := &lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.11"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("192.0.2.12"), Strict: true, Lookup: true},
		{Address: lisp.MustParseAddress("192.0.2.13")},
	}}
	nested := lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{{}, lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.21")}, {Address: lisp.MustParseAddress("192.0.2.22")},
	}})}})
	down := locator(lisp.MustParseAddress("192.0.2.3"), 2, 10)
	down.Reachable = false
	rec := lisp.MapRecord{TTL: 10, MaskLen: 16,
		EID: lisp.LCAFAddress(&lisp.InstanceID{IID: 1000, Address: lisp.MustParseAddress("10.1.0.0")}),
		Locators: []lisp.Locator{
			locator(lisp.MustParseAddress("192.0.2.1"), 1, 50),
			locator(lisp.NameAddress("not-an-rloc"), 1, 50),
			locator(lisp.LCAFAddress(elp), 1, 30),
			locator(nested, 1, 20),
			down,
		}}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{rec}}, etrAddr)
	k := dataplane.Key{InstanceID: 1000, Prefix: netip.MustParsePrefix("10.1.0.0/16")}
	got, ok := h.dp.get(k)
	if !ok {
		t.Fatalf("nothing installed for %v: %+v", k, h.c.Counters())
	}
	ip := netip.MustParseAddr
	want := dataplane.Entry{Action: dataplane.Encapsulate, Paths: []dataplane.Path{
		{Hops: []dataplane.Hop{{Addr: ip("192.0.2.1")}}, Priority: 1, Weight: 50, Up: true},
		{Hops: []dataplane.Hop{{Addr: ip("192.0.2.11"), Probe: true}, {Addr: ip("192.0.2.12"), Strict: true, Lookup: true},
			{Addr: ip("192.0.2.13")}}, Priority: 1, Weight: 30, Up: false},
		{Hops: []dataplane.Hop{{Addr: ip("192.0.2.21")}, {Addr: ip("192.0.2.22")}}, Priority: 1, Weight: 20, Up: true},
		{Hops: []dataplane.Hop{{Addr: ip("192.0.2.3")}}, Priority: 2, Weight: 10, Up: false},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("installed\n%+v\nwant\n%+v", got, want)
	}
	c := h.c.Counters()
	if c.Replies != 1 || c.Records[Installed] != 1 || c.UnusableLocators != 1 || c.Entries != 1 || c.Pending != 0 {
		t.Errorf("counters %+v", c)
	}
	snap := h.c.Snapshot()
	if len(snap) != 1 || snap[0].InstanceID != 1000 || snap[0].EIDPrefix != "10.1.0.0/16" || snap[0].Source != etrAddr.String() ||
		snap[0].TTLLeft != 600 || len(snap[0].Paths) != 4 || snap[0].Paths[3].Up || snap[0].Paths[3].Reachable ||
		snap[0].Paths[1].Down != "192.0.2.12 is being looked up" {
		t.Errorf("snapshot %+v", snap)
	}
}

// Only a reply to a request in flight is taken, and only its records
// that cover the EID asked.
func TestRepliesRefused(t *testing.T) {
	h := newHarness(t, oneResolver)
	rec := record("10.1.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))
	h.c.HandleReply(&lisp.MapReply{Nonce: 42, Records: []lisp.MapRecord{rec}}, etrAddr)
	if c := h.c.Counters(); c.Unsolicited != 1 || c.Entries != 0 || len(h.dp.puts) != 0 {
		t.Fatalf("unsolicited reply: %+v", c)
	}

	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	other := record("10.9.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.66"), 1, 1))
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{other, rec}}, etrAddr)
	if _, ok := h.dp.get(key("10.9.0.0/16")); ok {
		t.Error("a record for an EID not asked was installed")
	}
	if _, ok := h.dp.get(key("10.1.0.0/16")); !ok {
		t.Error("the record asked for was not installed")
	}
	// The same reply again: its request is answered already.
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{rec}}, etrAddr)
	c := h.c.Counters()
	if c.Records[NotRequested] != 1 || c.Records[Installed] != 1 || c.Unsolicited != 2 || c.Replies != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestNegativeReplies(t *testing.T) {
	for _, tc := range []struct {
		action lisp.Action
		want   dataplane.Action
	}{
		{lisp.ActionNativelyForward, dataplane.NativelyForward},
		{lisp.ActionNone, dataplane.NativelyForward},
		{lisp.ActionDrop, dataplane.Drop},
		{lisp.ActionDropPolicyDenied, dataplane.Drop},
		{lisp.ActionSendMapRequest, dataplane.SendMapRequest},
	} {
		h := newHarness(t, oneResolver)
		h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("172.16.0.1")})
		_, _, req := h.request(t)
		rec := record("172.0.0.0/8", 15)
		rec.Action = tc.action
		h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{rec}}, resolverA)
		got, ok := h.dp.get(key("172.0.0.0/8"))
		if !ok || got.Action != tc.want || len(got.Paths) != 0 {
			t.Errorf("%s: installed %+v, %v; want %s", tc.action, got, ok, tc.want)
		}
		// The TTL holds: gone after 15 minutes, not before.
		h.clk.advance(15*time.Minute - time.Second)
		h.c.Tick()
		if _, ok := h.dp.get(key("172.0.0.0/8")); !ok {
			t.Errorf("%s: expired early", tc.action)
		}
		h.clk.advance(time.Second)
		h.c.Tick()
		if _, ok := h.dp.get(key("172.0.0.0/8")); ok || h.c.Counters().Expired != 1 {
			t.Errorf("%s: not expired after its TTL", tc.action)
		}
	}
}

// A TTL of 0 is an answer to use once: nothing is cached.
func TestZeroTTLNotCached(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 0, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	if c := h.c.Counters(); c.Entries != 0 || c.Records[NotCached] != 1 || len(h.dp.puts) != 0 {
		t.Errorf("TTL 0: %+v", c)
	}
}

// A request without an answer is tried again, at the next map-resolver,
// with a new nonce; a late answer to an earlier try is still taken; the
// resolver that did not answer is asked after the other next time.
func TestRetriesRotateResolvers(t *testing.T) {
	h := newHarness(t, "map-cache: {map-resolvers: [192.0.2.100, \"2001:db8::100\"], request-timeout: 1s, request-retries: 2}\n")
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	dst1, _, req1 := h.request(t)
	h.clk.advance(999 * time.Millisecond)
	h.c.Tick()
	if out := h.net.take(); len(out) != 0 {
		t.Fatalf("retried before the timeout: %v", out)
	}
	h.clk.advance(time.Millisecond)
	h.c.Tick()
	dst2, _, req2 := h.request(t)
	if dst1 != resolverA || dst2 != resolverB || req1.Nonce == req2.Nonce {
		t.Fatalf("tries went to %s then %s, nonces %x %x", dst1, dst2, req1.Nonce, req2.Nonce)
	}
	// The late reply to the second try, from the second resolver.
	h.c.HandleReply(&lisp.MapReply{Nonce: req2.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, resolverB)
	if _, ok := h.dp.get(key("10.1.0.0/16")); !ok {
		t.Fatal("late reply not installed")
	}
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
	if dst, _, _ := h.request(t); dst != resolverB {
		t.Errorf("next request to %s, want the resolver that answered, %s, not the one down", dst, resolverB)
	}
	// Unanswered: three tries in all, then given up.
	for range 3 {
		h.clk.advance(time.Second)
		h.c.Tick()
	}
	if out := h.net.take(); len(out) != 2 {
		t.Errorf("%d retries, want 2", len(out))
	}
	if c := h.c.Counters(); c.Failed != 1 || c.Retried != 3 || c.Pending != 0 {
		t.Errorf("counters %+v", c)
	}
}

func TestLocalPrefixes(t *testing.T) {
	h := newHarness(t, oneResolver)
	local := dataplane.Key{Prefix: netip.MustParsePrefix("10.1.0.0/16")}
	if err := h.c.SetLocal([]dataplane.Key{local}); err != nil {
		t.Fatal(err)
	}
	if e, ok := h.dp.get(local); !ok || e.Action != dataplane.NativelyForward {
		t.Fatalf("local prefix installed as %+v, %v", e, ok)
	}
	// Traffic to the site's own EIDs is never resolved...
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.0.1")})
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("a miss for a local EID sent a Map-Request")
	}
	// ...nor replaced by a Map-Reply, and it never expires.
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{record("10.0.0.0/8", 1)}}, resolverA)
	h.clk.advance(48 * time.Hour)
	h.c.Tick()
	if e, ok := h.dp.get(local); !ok || e.Action != dataplane.NativelyForward {
		t.Errorf("local prefix now %+v, %v", e, ok)
	}
	if _, ok := h.dp.get(key("10.0.0.0/8")); ok {
		t.Error("the negative /8 around the site did not expire")
	}
}

// A full cache makes room by evicting the entry closest to expiry, never
// a local one.
func TestMaxEntriesEvicts(t *testing.T) {
	h := newHarness(t, "map-cache: {map-resolvers: [192.0.2.100], max-entries: 3}\n")
	h.c.SetLocal([]dataplane.Key{key("10.0.0.0/16")})
	install := func(eid, prefix string, ttl uint32) {
		h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr(eid)})
		_, _, req := h.request(t)
		h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
			record(prefix, ttl, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	}
	install("10.1.0.1", "10.1.0.0/16", 60)
	install("10.2.0.1", "10.2.0.0/16", 5) // expires first
	install("10.3.0.1", "10.3.0.0/16", 30)
	for _, k := range []string{"10.0.0.0/16", "10.1.0.0/16", "10.3.0.0/16"} {
		if _, ok := h.dp.get(key(k)); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if _, ok := h.dp.get(key("10.2.0.0/16")); ok {
		t.Error("10.2.0.0/16, closest to expiry, not evicted")
	}
	if c := h.c.Counters(); c.Evicted != 1 || c.Entries != 3 {
		t.Errorf("counters %+v", c)
	}
}

// An SMR for a cached EID sends an SMR-invoked Map-Request through the
// map-resolver for the cached prefix, at most once a second, and its reply
// replaces the entry.
func TestSMRRefreshes(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 60, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)

	smr := &lisp.MapRequest{SMR: true, Nonce: 7, SourceEID: lisp.MustParseAddress("10.1.0.0"),
		ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
		Records:  []lisp.RequestRecord{{EID: lisp.MustParseAddress("10.99.0.1"), MaskLen: 32}}}
	h.c.HandleSMR(smr, etrAddr)
	dst, _, inv := h.request(t)
	if dst != resolverA || !inv.SMRInvoked || inv.Records[0].EID.IP() != netip.MustParseAddr("10.1.0.0") || inv.Records[0].MaskLen != 16 {
		t.Fatalf("SMR-invoked request to %s: %s", dst, inv)
	}
	h.c.HandleSMR(smr, etrAddr) // within the second
	h.c.HandleSMR(smr, etrAddr)
	h.c.HandleSMR(&lisp.MapRequest{SMR: true, SourceEID: lisp.MustParseAddress("10.200.0.1"), ITRRLOCs: smr.ITRRLOCs}, etrAddr)
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("rate-limited or unknown SMRs sent %d datagrams", len(out))
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: inv.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 60, locator(lisp.MustParseAddress("192.0.2.2"), 1, 1))}}, etrAddr)
	if e, _ := h.dp.get(key("10.1.0.0/16")); len(e.Paths) != 1 || e.Paths[0].Hops[0].Addr != netip.MustParseAddr("192.0.2.2") {
		t.Errorf("after the SMR: %+v", e)
	}
	// The SMRs held back within the second: one refresh once it is over,
	// for the mapping may have changed again since the reply left.
	h.clk.advance(999 * time.Millisecond)
	h.c.Tick()
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("held-back SMR sent before the second was over")
	}
	h.clk.advance(time.Millisecond)
	h.c.Tick()
	if _, _, again := h.request(t); !again.SMRInvoked {
		t.Errorf("held-back refresh %s", again)
	}
	if c := h.c.Counters(); c.SMRs != 4 || c.SMRInvoked != 2 || c.SMRLimited != 2 || c.SMRIgnored != 1 {
		t.Errorf("counters %+v", c)
	}
}

// When probing finds a hop down, the entries with a path through it are
// installed again with that path down, and up again when it answers.
func TestLocatorChangedReinstalls(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	elp := lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.11")}, {Address: lisp.MustParseAddress("192.0.2.2")},
	}})
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{record("10.1.0.0/16", 60,
		locator(lisp.MustParseAddress("192.0.2.1"), 1, 1), locator(elp, 1, 1))}}, etrAddr)
	var addrs []string
	for _, l := range h.c.Locators() {
		addrs = append(addrs, l.Addr.String())
		if l.EID.Prefix != netip.MustParsePrefix("10.1.0.0/16") {
			t.Errorf("locator %s with EID %s", l.Addr, l.EID)
		}
	}
	if !reflect.DeepEqual(addrs, []string{"192.0.2.1", "192.0.2.11", "192.0.2.2"}) {
		t.Errorf("locators to probe: %v", addrs)
	}
	h.down[netip.MustParseAddr("192.0.2.11")] = true
	if n := h.c.LocatorChanged(netip.MustParseAddr("192.0.2.11")); n != 1 {
		t.Errorf("%d entries re-installed, want 1", n)
	}
	if e, _ := h.dp.get(key("10.1.0.0/16")); !e.Paths[0].Up || e.Paths[1].Up {
		t.Errorf("with the RTR down: %+v", e.Paths)
	}
	// Nothing changed for an address no path uses, or already accounted.
	if h.c.LocatorChanged(netip.MustParseAddr("192.0.2.11")) != 0 || h.c.LocatorChanged(netip.MustParseAddr("192.0.2.99")) != 0 {
		t.Error("re-installed without a change")
	}
	delete(h.down, netip.MustParseAddr("192.0.2.11"))
	h.c.LocatorChanged(netip.MustParseAddr("192.0.2.11"))
	if e, _ := h.dp.get(key("10.1.0.0/16")); !e.Paths[0].Up || !e.Paths[1].Up {
		t.Errorf("with the RTR back: %+v", e.Paths)
	}
	if snap := h.c.Snapshot(); snap[0].Paths[0].Hops[0].RTT != 0 || !snap[0].Paths[1].Hops[1].Up {
		t.Errorf("snapshot %+v", snap[0].Paths)
	}
}

// A data plane that refuses an entry: counted, nothing cached.
func TestPutFailure(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.dp.fail = true
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 60, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	if c := h.c.Counters(); c.PutErrors != 1 || c.Records[PutFailed] != 1 || c.Entries != 0 {
		t.Errorf("counters %+v", c)
	}
}

// The map-resolvers are asked in their order; one that lets a request
// time out is asked last for the holddown, then first again, and is up
// once it answers.
func TestResolverHolddown(t *testing.T) {
	h := newHarness(t, "map-cache: {map-resolvers: [192.0.2.100, \"2001:db8::100\"], request-timeout: 1s, request-retries: 2}\n")
	ask := func(eid string) netip.AddrPort {
		t.Helper()
		h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr(eid)})
		dst, _, _ := h.request(t)
		return dst
	}
	if dst := ask("10.1.0.1"); dst != resolverA {
		t.Fatalf("first request to %s, want the first resolver", dst)
	}
	h.clk.advance(time.Second)
	h.c.Tick()
	if dst, _, _ := h.request(t); dst != resolverB {
		t.Fatalf("retry to %s, want the second resolver", dst)
	}
	if rs := h.c.Resolvers(); !rs[0].Down || rs[1].Down || rs[0].DownSince.IsZero() {
		t.Errorf("resolvers %+v, want the first down", rs)
	}
	// New requests go to the second resolver at once, for the holddown.
	for _, eid := range []string{"10.2.0.1", "10.3.0.1"} {
		h.clk.advance(10 * time.Second)
		if dst := ask(eid); dst != resolverB {
			t.Errorf("request for %s to %s during the holddown, want the second resolver", eid, dst)
		}
	}
	// Then the first is asked first again; when it answers it is up.
	h.clk.advance(ResolverHolddown)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.4.0.1")})
	dst, _, req := h.request(t)
	if dst != resolverA {
		t.Fatalf("after the holddown, request to %s, want the first resolver again", dst)
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.4.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, resolverA)
	if rs := h.c.Resolvers(); rs[0].Down || rs[1].Down {
		t.Errorf("resolvers %+v, want both up", rs)
	}
}

// Entries the data plane kept across a restart go on as they are, and
// are asked for again: a reply replaces one (with its TTL and paths), and
// one that no reply replaces expires after a minute. The site's own
// prefixes are not adopted.
func TestAdopt(t *testing.T) {
	h := newHarness(t, oneResolver)
	if err := h.c.SetLocal([]dataplane.Key{key("10.9.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	puts := len(h.dp.puts)
	n := h.c.Adopt([]dataplane.StoredEntry{
		{Key: key("10.1.0.0/16"), Action: dataplane.Encapsulate, Paths: 2},
		{Key: key("10.2.0.0/16"), Action: dataplane.Encapsulate, Paths: 1},
		{Key: key("10.9.0.0/16"), Action: dataplane.NativelyForward},
	})
	if n != 2 || len(h.dp.puts) != puts {
		t.Fatalf("adopted %d, data plane written %d times", n, len(h.dp.puts)-puts)
	}
	snap := h.c.Snapshot()
	if len(snap) != 3 || snap[0].Source != "adopted" || snap[0].AdoptedPaths != 2 || snap[0].TTLLeft != 60 || !snap[2].Local {
		t.Fatalf("snapshot %+v", snap)
	}
	// A miss inside an adopted entry is no miss.
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("a miss inside an adopted entry sent %d datagrams", len(out))
	}
	h.c.Tick()
	out := h.net.take()
	if len(out) != 2 {
		t.Fatalf("%d refreshes sent, want 2", len(out))
	}
	var first *lisp.MapRequest
	for _, o := range out {
		req := o.msg.(*lisp.ECM).Message.(*lisp.MapRequest)
		if req.Records[0].EID.IP() == netip.MustParseAddr("10.1.0.0") {
			first = req
		}
		if req.SMRInvoked || req.Records[0].MaskLen != 16 {
			t.Errorf("refresh %s", req)
		}
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: first.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 10, locator(lisp.MustParseAddress("192.0.2.1"), 1, 100)),
	}}, etrAddr)
	if e, ok := h.dp.get(key("10.1.0.0/16")); !ok || len(e.Paths) != 1 {
		t.Errorf("the refresh did not replace the entry: %+v", e)
	}
	// The other has no reply: it goes after a minute.
	h.clk.advance(61 * time.Second)
	h.c.Tick()
	if _, ok := h.dp.get(key("10.2.0.0/16")); ok || h.c.Counters().Adopted != 2 {
		t.Errorf("the unrefreshed adopted entry stayed: %+v", h.c.Snapshot())
	}
	if snap := h.c.Snapshot(); len(snap) != 2 || snap[0].Source != etrAddr.String() || snap[0].TTLLeft != 539 {
		t.Errorf("snapshot %+v", snap)
	}
}

// SetLocal replaces the site's prefixes: a prefix no longer given goes.
func TestSetLocalReplaces(t *testing.T) {
	h := newHarness(t, oneResolver)
	if err := h.c.SetLocal([]dataplane.Key{key("10.9.0.0/16"), key("10.8.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.SetLocal([]dataplane.Key{key("10.8.0.0/16"), key("10.7.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	_, gone := h.dp.get(key("10.9.0.0/16"))
	_, kept := h.dp.get(key("10.8.0.0/16"))
	_, added := h.dp.get(key("10.7.0.0/16"))
	if gone || !kept || !added || len(h.c.Snapshot()) != 2 {
		t.Errorf("after the second SetLocal: %+v", h.c.Snapshot())
	}
}

// Static entries of the configuration are installed with their paths,
// never expire, are not replaced by Map-Replies, and a second SetStatic
// (a reload) changes only what changed.
func TestSetStatic(t *testing.T) {
	h := newHarness(t, oneResolver)
	static := func(yaml string) []config.StaticMapping {
		var st []config.StaticMapping
		if err := config.Decode([]byte(yaml), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := static(`
- {eid-prefix: 10.3.0.0/16, locators: [{address: 192.0.2.7, priority: 1, weight: 100}, {elp: [192.0.2.11, {address: 192.0.2.12, probe: true}], priority: 2}]}
- {eid-prefix: 10.4.0.0/16, instance-id: 7, action: drop}
`)
	second := static(`
- {eid-prefix: 10.3.0.0/16, locators: [{address: 192.0.2.8, priority: 1, weight: 100}]}
- {eid-prefix: 10.4.0.0/16, instance-id: 7, action: drop}
`)
	if n, err := h.c.SetStatic(first, 1000); n != 2 || err != nil {
		t.Fatalf("SetStatic: %d, %v", n, err)
	}
	e, ok := h.dp.get(dataplane.Key{InstanceID: 1000, Prefix: netip.MustParsePrefix("10.3.0.0/16")})
	want := dataplane.Entry{Paths: []dataplane.Path{
		{Hops: []dataplane.Hop{{Addr: netip.MustParseAddr("192.0.2.7")}}, Priority: 1, Weight: 100, Up: true},
		{Hops: []dataplane.Hop{{Addr: netip.MustParseAddr("192.0.2.11")}, {Addr: netip.MustParseAddr("192.0.2.12"), Probe: true}}, Priority: 2, Up: true},
	}}
	if !ok || !reflect.DeepEqual(e, want) {
		t.Errorf("static entry %+v", e)
	}
	if e, ok := h.dp.get(dataplane.Key{InstanceID: 7, Prefix: netip.MustParsePrefix("10.4.0.0/16")}); !ok || e.Action != dataplane.Drop {
		t.Errorf("negative static entry %+v", e)
	}
	if len(h.c.Locators()) != 3 {
		t.Errorf("locators %+v, want the static entries' probed", h.c.Locators())
	}
	// A Map-Reply does not replace it, and it does not expire.
	h.c.Miss(dataplane.Miss{InstanceID: 1000, EID: netip.MustParseAddr("10.3.1.1")})
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("a miss inside a static entry sent %d datagrams", len(out))
	}
	h.clk.advance(48 * time.Hour)
	h.c.Tick()
	// The reload: one entry changes, the other stays as it is.
	puts := len(h.dp.puts)
	if n, err := h.c.SetStatic(second, 1000); n != 1 || err != nil || len(h.dp.puts) != puts+1 {
		t.Fatalf("second SetStatic: %d, %v, %d puts", n, err, len(h.dp.puts)-puts)
	}
	if e, _ := h.dp.get(dataplane.Key{InstanceID: 1000, Prefix: netip.MustParsePrefix("10.3.0.0/16")}); len(e.Paths) != 1 ||
		e.Paths[0].Hops[0].Addr != netip.MustParseAddr("192.0.2.8") {
		t.Errorf("changed static entry %+v", e)
	}
	if n, _ := h.c.SetStatic(nil, 1000); n != 2 || len(h.dp.entries) != 0 {
		t.Errorf("removing the static entries: %d, left %+v", n, h.dp.entries)
	}
}

// An SMR for an EID whose Map-Request is in flight (the te role's, say,
// racing its own answer) is not lost: the reply is installed, then the
// mapping asked for again.
func TestSMRWhileInFlight(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.1.2.3")})
	_, _, req := h.request(t)
	smr := &lisp.MapRequest{SMR: true, Nonce: 7, SourceEID: lisp.MustParseAddress("10.1.0.0"),
		ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.1")},
		Records:  []lisp.RequestRecord{{EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16}}}
	h.c.HandleSMR(smr, etrAddr)
	if out := h.net.take(); len(out) != 0 {
		t.Fatalf("an SMR before the reply sent %d datagrams", len(out))
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{
		record("10.1.0.0/16", 60, locator(lisp.MustParseAddress("192.0.2.1"), 1, 1))}}, etrAddr)
	h.c.Tick()
	_, _, again := h.request(t)
	if !again.SMRInvoked || again.Records[0].MaskLen != 16 {
		t.Errorf("after the reply: %s, want an SMR-invoked request for the prefix", again)
	}
	if c := h.c.Counters(); c.SMRInFlight != 1 || c.SMRIgnored != 0 {
		t.Errorf("counters %+v", c)
	}
	// An SMR for nothing cached nor asked is still ignored.
	h.c.HandleSMR(&lisp.MapRequest{SMR: true, SourceEID: lisp.MustParseAddress("10.200.0.1"), ITRRLOCs: smr.ITRRLOCs}, etrAddr)
	if c := h.c.Counters(); c.SMRIgnored != 1 {
		t.Errorf("counters %+v", c)
	}
}
