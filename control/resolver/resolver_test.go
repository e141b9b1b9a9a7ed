package resolver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// fakeDB answers from a fixed list: a stand-in for the map-server in
// these unit tests (the daemon tests use the real one).
type fakeDB map[mapping.EID]mapping.Answer

func (f fakeDB) Resolve(iid uint32, a netip.Addr) mapping.Answer {
	if ans, ok := f[mapping.HostEID(iid, a)]; ok {
		return ans
	}
	return mapping.Answer{Kind: mapping.NotFound, EID: mapping.NewEID(iid, netip.PrefixFrom(a, 8).Masked())}
}

var (
	itr     = netip.MustParseAddrPort("192.0.2.1:61000")
	etrAddr = netip.MustParseAddr("198.51.100.9")
)

func testDB() fakeDB {
	mapped := lisp.MapRecord{TTL: 1440, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress("192.0.2.50")}}}
	host := func(iid uint32, a string) mapping.EID { return mapping.HostEID(iid, netip.MustParseAddr(a)) }
	return fakeDB{
		host(0, "10.1.0.1"):    {Kind: mapping.Mapping, EID: mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/16")), Record: mapped},
		host(0, "10.2.0.1"):    {Kind: mapping.Forward, ETR: etrAddr},
		host(0, "10.3.0.1"):    {Kind: mapping.Unregistered, EID: mapping.NewEID(0, netip.MustParsePrefix("10.3.0.0/16"))},
		host(1000, "10.1.0.1"): {Kind: mapping.Unregistered, EID: mapping.NewEID(1000, netip.MustParsePrefix("10.1.0.0/16"))},
	}
}

// cfgNoLimit is a map-resolver configuration without a rate limit.
var cfgNoLimit = config.MapResolver{NegativeTTL: config.Duration{Duration: 15 * time.Minute},
	UnregisteredTTL: config.Duration{Duration: time.Minute}}

func newResolver(t *testing.T, yaml string) *Resolver {
	t.Helper()
	cfg, err := config.Parse([]byte("roles: [map-resolver]\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg.MapResolver, testDB(), nil)
}

// ecm builds what an ITR sends: its Map-Request for eid, inner source
// port 61000, ITR-RLOCs as given.
func ecm(t *testing.T, eid lisp.Address, itrRLOCs ...lisp.Address) ([]byte, *lisp.ECM) {
	t.Helper()
	e := &lisp.ECM{
		Source: itr, Destination: netip.MustParseAddrPort("10.1.0.1:4342"), TTL: 64,
		Message: &lisp.MapRequest{Nonce: 0xabc, ITRRLOCs: itrRLOCs,
			Records: []lisp.RequestRecord{{EID: eid, MaskLen: 32}}},
	}
	raw, err := e.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := lisp.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, decoded.(*lisp.ECM)
}

func onlyReply(t *testing.T, out *control.Outbox) (netip.AddrPort, *lisp.MapReply) {
	t.Helper()
	if out.Len() != 1 {
		t.Fatalf("%d datagrams, want one Map-Reply", out.Len())
	}
	dst, b := out.At(0)
	m, err := lisp.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return dst, m.(*lisp.MapReply)
}

func TestProxyReplyGoesToITR(t *testing.T) {
	r := newResolver(t, "")
	var out control.Outbox
	raw, e := ecm(t, lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("192.0.2.1"))
	r.HandleECM(raw, e, netip.MustParseAddrPort("192.0.2.1:4342"), &out)
	dst, reply := onlyReply(t, &out)
	if dst != itr || reply.Nonce != 0xabc || len(reply.Records) != 1 || reply.Records[0].Locators[0].Address.String() != "192.0.2.50" {
		t.Errorf("reply to %s: %s", dst, reply)
	}
}

func TestForwardSetsToETR(t *testing.T) {
	r := newResolver(t, "")
	var out control.Outbox
	raw, e := ecm(t, lisp.MustParseAddress("10.2.0.1"), lisp.MustParseAddress("192.0.2.1"))
	r.HandleECM(raw, e, itr, &out)
	if out.Len() != 1 {
		t.Fatalf("%d datagrams, want the forwarded ECM", out.Len())
	}
	dst, b := out.At(0)
	m, err := lisp.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	fwd := m.(*lisp.ECM)
	if dst != netip.AddrPortFrom(etrAddr, 4342) || !fwd.ToETR || fwd.Source != itr ||
		fwd.Message.(*lisp.MapRequest).Nonce != 0xabc {
		t.Errorf("forwarded to %s: %s", dst, fwd)
	}
	if c := r.Counters(); c.Forwarded != 1 || c.Replies != 0 {
		t.Errorf("counters %+v", c)
	}
}

// engineer records what the map-resolver asks and tells it.
type engineer struct{ asked, told []Question }

func (e *engineer) Engineer(q Question) (lisp.MapRecord, bool) {
	e.asked = append(e.asked, q)
	return lisp.MapRecord{}, false
}

func (e *engineer) Forwarded(q Question) { e.told = append(e.told, q) }

// A stateful request (the subflow's flow around the EID) is resolved
// for its EID, forwarded as it is, and the engineer told; a proxied
// prefix's answer is the engineer's to change.
func TestStatefulRequestForwarded(t *testing.T) {
	r := newResolver(t, "")
	en := &engineer{}
	r.SetEngineer(en)
	var out control.Outbox
	f := control.Flow{Protocol: 6, Source: netip.MustParseAddrPort("10.9.0.1:40000"), Dest: netip.MustParseAddrPort("10.2.0.1:80")}
	raw, e := ecm(t, control.FlowAddress(f), lisp.MustParseAddress("192.0.2.1"))
	r.HandleECM(raw, e, itr, &out)
	if dst, b := out.At(0); out.Len() != 1 || dst != netip.AddrPortFrom(etrAddr, 4342) || string(b[1:]) != string(raw[1:]) {
		t.Fatalf("forwarded %d datagrams to %s", out.Len(), dst)
	}
	if len(en.told) != 1 || en.told[0].Answer.Kind != mapping.Forward || len(en.asked) != 0 {
		t.Errorf("engineer asked %d, told %+v", len(en.asked), en.told)
	}
	out.Reset()
	raw, e = ecm(t, lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("192.0.2.1"))
	r.HandleECM(raw, e, itr, &out)
	if len(en.asked) != 1 || en.asked[0].Answer.Kind != mapping.Mapping {
		t.Errorf("engineer asked %+v", en.asked)
	}
}

func TestNegativeReplies(t *testing.T) {
	r := newResolver(t, "map-resolver: {negative-ttl: 15m, unregistered-ttl: 90s}\n")
	for _, tc := range []struct {
		eid    lisp.Address
		prefix string
		ttl    uint32
	}{
		{lisp.MustParseAddress("10.3.0.1"), "10.3.0.0/16", 2}, // 90 s rounds up to 2 minutes
		{lisp.MustParseAddress("172.16.0.1"), "172.0.0.0/8", 15},
		{lisp.LCAFAddress(&lisp.InstanceID{IID: 1000, Address: lisp.MustParseAddress("10.1.0.1")}), "[1000]10.1.0.0/16", 2},
	} {
		var out control.Outbox
		raw, e := ecm(t, tc.eid, lisp.MustParseAddress("192.0.2.1"))
		r.HandleECM(raw, e, itr, &out)
		_, reply := onlyReply(t, &out)
		rec := reply.Records[0]
		got, err := mapping.FromWire(rec.EID, rec.MaskLen)
		if err != nil || got.String() != tc.prefix || rec.TTL != tc.ttl || rec.Action != lisp.ActionNativelyForward ||
			len(rec.Locators) != 0 || rec.Authoritative {
			t.Errorf("%s: negative record %s", tc.eid, &rec)
		}
	}
}

// The reply goes to an ITR-RLOC of the family the request came from.
func TestReplyAddressFamily(t *testing.T) {
	r := newResolver(t, "")
	var out control.Outbox
	raw, e := ecm(t, lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("2001:db8::1"), lisp.MustParseAddress("192.0.2.7"))
	r.HandleECM(raw, e, netip.MustParseAddrPort("192.0.2.7:4342"), &out)
	if dst, _ := onlyReply(t, &out); dst.Addr() != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("reply to %s, want the IPv4 ITR-RLOC", dst)
	}
}

func TestDrops(t *testing.T) {
	r := newResolver(t, "map-resolver: {rate-limit: {per-second: 1, burst: 2}}\n")
	var out control.Outbox
	raw, e := ecm(t, lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("192.0.2.1"))
	for range 3 {
		r.HandleECM(raw, e, itr, &out)
	}
	if out.Len() != 2 || r.Counters().Dropped[RateLimited] != 1 {
		t.Errorf("burst of 2 then limited: %d replies, %d limited", out.Len(), r.Counters().Dropped[RateLimited])
	}
	// Another source has its own budget.
	out.Reset()
	r.HandleECM(raw, e, netip.MustParseAddrPort("192.0.2.99:4342"), &out)
	if out.Len() != 1 {
		t.Error("a second source was limited by the first")
	}
	register := &lisp.ECM{Source: itr, Destination: itr, Message: &lisp.MapRegister{}}
	r.HandleECM(nil, register, netip.MustParseAddrPort("192.0.2.98:4342"), &out)
	if r.Counters().Dropped[NotMapRequest] != 1 {
		t.Error("an ECM carrying a Map-Register was not dropped")
	}
}

func TestLimiterForgetsIdleSources(t *testing.T) {
	l := newLimiter(1, 1)
	l.allow(netip.MustParseAddr("192.0.2.1"))
	l.lastSweep = time.Now().Add(-2 * idleAfter)
	l.sources[netip.MustParseAddr("192.0.2.1")].seen = time.Now().Add(-2 * idleAfter)
	l.allow(netip.MustParseAddr("192.0.2.2"))
	if _, ok := l.sources[netip.MustParseAddr("192.0.2.1")]; ok || len(l.sources) != 1 {
		t.Errorf("sources after a sweep: %v", l.sources)
	}
}

// Answering a request allocates little: the map-resolver's hot path.
func TestHandleECMAllocations(t *testing.T) {
	r := newResolver(t, "map-resolver: {rate-limit: {per-second: 0}}\n")
	var out control.Outbox
	raw, e := ecm(t, lisp.MustParseAddress("10.1.0.1"), lisp.MustParseAddress("192.0.2.1"))
	n := testing.AllocsPerRun(200, func() {
		out.Reset()
		r.HandleECM(raw, e, itr, &out)
	})
	if n > 0 {
		t.Errorf("HandleECM allocates %.1f times per request", n)
	}
}
