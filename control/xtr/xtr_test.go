package xtr

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

type sent struct {
	dst netip.AddrPort
	raw []byte
	msg lisp.Message
}

type fakeNet struct {
	t   testing.TB
	mu  sync.Mutex
	out []sent
}

func (n *fakeNet) Send(dst netip.AddrPort, b []byte) error {
	m, err := lisp.Parse(b)
	if err != nil {
		n.t.Errorf("sent something that does not decode: %v", err)
		return err
	}
	n.mu.Lock()
	n.out = append(n.out, sent{dst, append([]byte(nil), b...), m})
	n.mu.Unlock()
	return nil
}

func (n *fakeNet) take() []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.out
	n.out = nil
	return out
}

const (
	keyA = "key of map-server a"
	keyB = "key of map-server b"
)

var (
	msA   = netip.MustParseAddrPort("192.0.2.1:4342")
	msB   = netip.MustParseAddrPort("192.0.2.2:4342")
	rloc  = netip.MustParseAddr("198.51.100.1")
	rloc6 = netip.MustParseAddr("2001:db8:1::1")
)

const siteConfig = `
roles: [xtr]
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0], instance-id: 0}
map-cache: {map-resolvers: [192.0.2.1]}
xtr:
  xtr-id: 0102030405060708090a0b0c0d0e0f10
  site-id: 7
  database-mappings:
    - eid-prefix: 10.1.0.0/16
      ttl: 10m
      locators:
        - {address: 198.51.100.1, priority: 1, weight: 60}
        - elp: [{address: 192.0.2.11, probe: true}, {address: 192.0.2.12, strict: true, lookup: true}, 198.51.100.1]
          priority: 1
          weight: 40
    - eid-prefix: 10.1.2.0/24
      locators: [{address: 198.51.100.2, priority: 2, weight: 100}]
  map-servers:
    - {address: 192.0.2.1, key-id: 3, secret: "` + keyA + `"}
    - {address: "192.0.2.2:4342", algorithm: hmac-sha1, secret: "` + keyB + `", proxy-reply: true}
`

type harness struct {
	x   *XTR
	net *fakeNet
	now time.Time
}

func newHarness(t testing.TB, yaml string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{net: &fakeNet{t: t}, now: time.Unix(1_700_000_000, 0)}
	h.x, err = New(cfg.XTR, Options{Sender: h.net, LocalRLOCs: func() []netip.Addr { return []netip.Addr{rloc6, rloc} }})
	if err != nil {
		t.Fatal(err)
	}
	h.x.SetClock(func() time.Time { return h.now })
	return h
}

// registers returns the Map-Registers sent since the last take, by
// map-server, checking that each verifies with its map-server's key.
func (h *harness) registers(t *testing.T) map[netip.AddrPort]sent {
	t.Helper()
	out := map[netip.AddrPort]sent{}
	for _, s := range h.net.take() {
		if _, ok := s.msg.(*lisp.MapRegister); !ok {
			t.Fatalf("sent %s to %s, want a Map-Register", s.msg.Type(), s.dst)
		}
		key := map[netip.AddrPort]string{msA: keyA, msB: keyB}[s.dst]
		if err := lisp.Verify(s.raw, []byte(key)); err != nil {
			t.Errorf("Map-Register to %s does not verify with its key: %v", s.dst, err)
		}
		out[s.dst] = s
	}
	return out
}

func TestRegisterWhatIsConfigured(t *testing.T) {
	h := newHarness(t, siteConfig)
	h.x.Tick()
	regs := h.registers(t)
	if len(regs) != 2 {
		t.Fatalf("Map-Registers to %d map-servers, want 2", len(regs))
	}
	a := regs[msA].msg.(*lisp.MapRegister)
	b := regs[msB].msg.(*lisp.MapRegister)
	if !a.WantMapNotify || a.ProxyReply || a.Auth.KeyID != 3 || a.Auth.Algorithm != lisp.AuthHMACSHA256 ||
		!b.ProxyReply || b.Auth.Algorithm != lisp.AuthHMACSHA1 || a.Nonce == b.Nonce {
		t.Errorf("flags: %s\n%s", a, b)
	}
	if a.XTRID == nil || a.XTRID.ID[0] != 1 || a.XTRID.ID[15] != 0x10 || a.XTRID.SiteID != 7 {
		t.Errorf("xTR-ID %+v", a.XTRID)
	}
	if len(a.Records) != 2 {
		t.Fatalf("%d records", len(a.Records))
	}
	r := a.Records[0]
	if r.EID.IP() != netip.MustParseAddr("10.1.0.0") || r.MaskLen != 16 || r.TTL != 10 || len(r.Locators) != 2 {
		t.Fatalf("record %s", &r)
	}
	if l := r.Locators[0]; l.Address.IP() != rloc || l.Priority != 1 || l.Weight != 60 || !l.Reachable {
		t.Errorf("RLOC %s", l)
	}
	elp, ok := r.Locators[1].Address.LCAF().(*lisp.ELP)
	if !ok || len(elp.Hops) != 3 || r.Locators[1].Weight != 40 || !r.Locators[1].Reachable {
		t.Fatalf("ELP locator %s", r.Locators[1])
	}
	want := []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.11"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("192.0.2.12"), Strict: true, Lookup: true},
		{Address: lisp.MustParseAddress("198.51.100.1")},
	}
	for i, hop := range elp.Hops {
		if !hop.Address.Equal(want[i].Address) || hop.RLOCProbe != want[i].RLOCProbe || hop.Strict != want[i].Strict || hop.Lookup != want[i].Lookup {
			t.Errorf("hop %d: %s, want %s", i, hop, want[i])
		}
	}
	if a.Records[1].TTL != 1440 { // the default, a day
		t.Errorf("default TTL %d minutes", a.Records[1].TTL)
	}
	// Nothing more until the interval is over.
	h.now = h.now.Add(500 * time.Millisecond)
	h.x.Tick()
	if len(h.net.take()) != 0 {
		t.Error("sent again before the retry time")
	}
}

// The records an ETR registers and answers with are authoritative (the A
// bit, RFC 9301 §5.4 and §5.6) and their locators are not for multicast
// (M-priority 255, M-weight 0), read from the bytes sent: the Map-Register
// to msA (HMAC-SHA-256, 32 bytes of authentication data) and a Map-Reply,
// whose first record has an IPv4 EID.
func TestRecordsAreAuthoritativeAndUnicast(t *testing.T) {
	h := newHarness(t, siteConfig)
	h.x.Tick()
	reg := h.registers(t)[msA].raw
	var out control.Outbox
	from := netip.MustParseAddrPort("192.0.2.1:4342")
	if r := h.x.HandleRequest(request("10.1.2.3", false, "192.0.2.50"), 61000, from, &out); r != RequestAnswered {
		t.Fatalf("result %s", r)
	}
	_, rep := out.At(0)
	for name, rec := range map[string][]byte{
		"Map-Register": reg[4+8+4+32:], // type and flags, nonce, key ID, algorithm, length, data
		"Map-Reply":    rep[4+8:],      // type and flags, nonce
	} {
		// TTL, locator count, mask-length, ACT|A|reserved, map-version,
		// EID-AFI and the IPv4 EID; then the first locator's priority,
		// weight, M-priority and M-weight.
		if rec[6]&0x10 == 0 {
			t.Errorf("%s: record flags %#02x, want the A bit (0x10)", name, rec[6])
		}
		if loc := rec[16:20]; loc[2] != 255 || loc[3] != 0 {
			t.Errorf("%s: locator priority, weight, M-priority, M-weight %v, want M 255/0", name, loc)
		}
	}
}

// notify builds the Map-Notify a map-server sends for a Map-Register.
func notify(t *testing.T, nonce uint64, keyID uint8, alg lisp.AuthAlgorithm, key string) []byte {
	t.Helper()
	n := &lisp.MapNotify{Nonce: nonce, Auth: lisp.Auth{KeyID: keyID, Algorithm: alg}}
	b, err := n.AppendSigned(nil, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMapNotifyChecked(t *testing.T) {
	h := newHarness(t, siteConfig)
	var out control.Outbox
	h.x.Tick()
	regs := h.registers(t)
	nonceA := regs[msA].msg.(*lisp.MapRegister).Nonce
	for _, bad := range []struct {
		raw  []byte
		want NotifyResult
	}{
		{notify(t, nonceA, 3, lisp.AuthHMACSHA256, "not the key"), NotifyAuthFailed},
		{notify(t, nonceA, 3, lisp.AuthHMACSHA256, keyB), NotifyAuthFailed}, // the other map-server's key
		{notify(t, nonceA, 4, lisp.AuthHMACSHA256, keyA), NotifyWrongKey},
		{notify(t, nonceA, 3, lisp.AuthHMACSHA1, keyA), NotifyWrongKey},
		{notify(t, nonceA, 3, lisp.AuthNone, ""), NotifyUnauthenticated},
		{notify(t, nonceA+1<<32, 3, lisp.AuthHMACSHA256, keyA), NotifyUnknownNonce}, // a second later: never sent
		{[]byte{0x40, 0, 0, 1, 2}, NotifyMalformed},
	} {
		before := h.x.Counters().Notifies[bad.want]
		h.x.HandleNotify(bad.raw, msA, &out)
		if h.x.Counters().Notifies[bad.want] != before+1 {
			t.Errorf("Map-Notify not refused as %s", bad.want)
		}
	}
	if st := h.x.Status().MapServers[0]; st.State != "registering" || st.Notifies != 0 {
		t.Fatalf("after refused Map-Notifies: %+v", st)
	}
	h.x.HandleNotify(notify(t, nonceA, 3, lisp.AuthHMACSHA256, keyA), msA, &out)
	st := h.x.Status()
	if a := st.MapServers[0]; a.State != "registered" || a.Notifies != 1 || !a.LastNotify.Equal(h.now) {
		t.Errorf("map-server a: %+v", a)
	}
	if b := st.MapServers[1]; b.State != "registering" {
		t.Errorf("map-server b: %+v", b)
	}
	// The round is over: the same Map-Notify again is refused.
	h.x.HandleNotify(notify(t, nonceA, 3, lisp.AuthHMACSHA256, keyA), msA, &out)
	if c := h.x.Counters(); c.Notifies[NotifyAccepted] != 1 || c.Notifies[NotifyUnknownNonce] != 2 {
		t.Errorf("counters %+v", c)
	}
}

// Without a Map-Notify, a Map-Register is sent again every second, three
// in all; then the round has failed, and the next one comes with the next
// register interval.
func TestRegisterRetries(t *testing.T) {
	h := newHarness(t, siteConfig)
	var out control.Outbox
	h.x.Tick()
	first := h.registers(t)[msA].msg.(*lisp.MapRegister).Nonce
	var nonces []uint64
	for range 2 {
		h.now = h.now.Add(time.Second)
		h.x.Tick()
		regs := h.registers(t)
		if len(regs) != 2 {
			t.Fatalf("%d retries, want one per map-server", len(regs))
		}
		nonces = append(nonces, regs[msA].msg.(*lisp.MapRegister).Nonce)
	}
	if nonces[0] == first || nonces[1] == nonces[0] {
		t.Error("retries reuse a nonce")
	}
	h.now = h.now.Add(time.Second)
	h.x.Tick()
	if out := h.net.take(); len(out) != 0 {
		t.Errorf("%d Map-Registers after the third", len(out))
	}
	st := h.x.Status().MapServers[0]
	if st.State != "failing" || st.Failures != 1 || st.Registers != 3 {
		t.Errorf("after 3 unanswered Map-Registers: %+v", st)
	}
	// A late Map-Notify of the failed round does not count.
	h.x.HandleNotify(notify(t, first, 3, lisp.AuthHMACSHA256, keyA), msA, &out)
	if h.x.Counters().Notifies[NotifyUnknownNonce] != 1 {
		t.Error("late Map-Notify accepted")
	}
	h.now = h.now.Add(57 * time.Second) // a minute after the first
	h.x.Tick()
	regs := h.registers(t)
	if len(regs) != 2 {
		t.Fatalf("next round: %d Map-Registers", len(regs))
	}
	// A Map-Notify for any try of the round acknowledges it.
	h.x.HandleNotify(notify(t, regs[msA].msg.(*lisp.MapRegister).Nonce, 3, lisp.AuthHMACSHA256, keyA), msA, &out)
	if st := h.x.Status().MapServers[0]; st.State != "registered" || st.FailuresInARow != 0 || st.Failures != 1 {
		t.Errorf("after the next round: %+v", st)
	}
	if c := h.x.Counters(); c.Registers != 8 || c.Failures != 2 {
		t.Errorf("counters %+v", c)
	}
}

func request(eid string, probe bool, itrs ...string) *lisp.MapRequest {
	req := &lisp.MapRequest{Nonce: 0xfeed, Probe: probe, SourceEID: lisp.MustParseAddress("10.9.0.1"),
		Records: []lisp.RequestRecord{{EID: lisp.MustParseAddress(eid), MaskLen: 32}}}
	for _, a := range itrs {
		req.ITRRLOCs = append(req.ITRRLOCs, lisp.MustParseAddress(a))
	}
	return req
}

func reply(t *testing.T, out *control.Outbox) (netip.AddrPort, *lisp.MapReply) {
	t.Helper()
	if out.Len() != 1 {
		t.Fatalf("%d datagrams, want one Map-Reply", out.Len())
	}
	dst, b := out.At(0)
	m, err := lisp.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	return dst, m.(*lisp.MapReply)
}

// A forwarded Map-Request is answered to the ITR-RLOC of the request's
// family, at the inner source port, with the longest matching mapping.
func TestAnswerRequests(t *testing.T) {
	h := newHarness(t, siteConfig)
	var out control.Outbox
	from := netip.MustParseAddrPort("192.0.2.1:4342") // the map-server that forwarded it
	if r := h.x.HandleRequest(request("10.1.2.3", false, "2001:db8:9::1", "192.0.2.50"), 61000, from, &out); r != RequestAnswered {
		t.Fatalf("result %s", r)
	}
	dst, rep := reply(t, &out)
	if dst != netip.MustParseAddrPort("192.0.2.50:61000") || rep.Nonce != 0xfeed || rep.Probe || len(rep.Records) != 1 {
		t.Fatalf("reply to %s: %s", dst, rep)
	}
	if rec := rep.Records[0]; rec.MaskLen != 24 || !rec.Authoritative || rec.TTL != 1440 || rec.Locators[0].Address.IP() != netip.MustParseAddr("198.51.100.2") {
		t.Errorf("record %s, want the /24, authoritative", &rec)
	}
	if r := h.x.HandleRequest(request("10.1.9.9", false, "192.0.2.50"), 61000, from, &out); r != RequestAnswered {
		t.Errorf("10.1.9.9: %s", r)
	} else if _, rep := reply(t, &out); rep.Records[0].MaskLen != 16 || len(rep.Records[0].Locators) != 2 {
		t.Errorf("10.1.9.9: %s", rep)
	}
	for _, tc := range []struct {
		req  *lisp.MapRequest
		want RequestResult
	}{
		{request("10.2.0.1", false, "192.0.2.50"), RequestNotOurs},
		{&lisp.MapRequest{ITRRLOCs: []lisp.Address{lisp.MustParseAddress("192.0.2.50")}}, RequestNoRecords},
		{request("10.1.0.1", false), RequestNoITRRLOC}, // an ITR-RLOC of AFI 0
	} {
		if tc.req.ITRRLOCs == nil {
			tc.req.ITRRLOCs = []lisp.Address{{}}
		}
		if r := h.x.HandleRequest(tc.req, 61000, from, &out); r != tc.want || out.Len() != 0 {
			t.Errorf("%s: %s with %d datagrams, want %s and none", tc.req, r, out.Len(), tc.want)
		}
	}
}

// RLOC probes are answered with the probe bit: with the mapping for the
// site's EIDs, with a bare record for others; an RTR answers them too.
func TestAnswerProbes(t *testing.T) {
	h := newHarness(t, siteConfig)
	rtr, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort("192.0.2.50:4342")
	var out control.Outbox
	if r := h.x.HandleRequest(request("10.1.0.0", true, "192.0.2.50"), from.Port(), from, &out); r != RequestProbe {
		t.Fatalf("probe for our EID: %s", r)
	}
	dst, rep := reply(t, &out)
	if dst != from || !rep.Probe || rep.Nonce != 0xfeed || len(rep.Records[0].Locators) != 2 {
		t.Errorf("probe reply to %s: %s", dst, rep)
	}
	// A probe from the ITR's second RLOC is answered there: the reply
	// takes the path back that the probe took.
	second := netip.MustParseAddrPort("192.0.2.51:4342")
	h.x.HandleRequest(request("10.1.0.0", true, "192.0.2.50", "192.0.2.51"), second.Port(), second, &out)
	if dst, _ := reply(t, &out); dst != second {
		t.Errorf("probe from %s answered at %s", second, dst)
	}
	for _, x := range []*XTR{h.x, rtr} {
		if r := x.HandleRequest(request("10.7.0.1", true, "192.0.2.50"), from.Port(), from, &out); r != RequestProbeOther {
			t.Fatalf("probe for another EID: %s", r)
		}
		_, rep := reply(t, &out)
		if rec := rep.Records[0]; !rep.Probe || rec.EID.IP() != netip.MustParseAddr("10.7.0.1") || rec.MaskLen != 32 ||
			len(rec.Locators) != 0 || rec.TTL != 0 {
			t.Errorf("probe reply %s", rep)
		}
	}
	// An RTR answers nothing else.
	if r := rtr.HandleRequest(request("10.7.0.1", false, "192.0.2.50"), 4342, from, &out); r != RequestNotOurs || out.Len() != 0 {
		t.Errorf("RTR answered a Map-Request: %s", r)
	}
	if st := rtr.Status(); len(st.Mappings) != 0 || len(st.MapServers) != 0 {
		t.Errorf("RTR status %+v", st)
	}
}

// When a mapping changes, the ITRs that asked for it lately get an SMR,
// and the map-servers the new mapping at once.
func TestSMRWhenMappingsChange(t *testing.T) {
	h := newHarness(t, siteConfig)
	h.x.Tick()
	h.net.take()
	var out control.Outbox
	h.x.HandleRequest(request("10.1.0.1", false, "192.0.2.50"), 61000, msA, &out)
	h.x.HandleRequest(request("10.1.2.1", false, "192.0.2.60"), 61000, msA, &out)
	h.x.HandleRequest(request("10.1.0.1", true, "192.0.2.70"), 61000, msA, &out) // a probe: not an ITR to solicit
	if n := h.x.SetLocatorReachable(netip.MustParseAddr("198.51.100.1"), false); n != 1 {
		t.Fatalf("%d SMRs, want 1 (only 10.1.0.0/16 uses the RLOC)", n)
	}
	var smr *lisp.MapRequest
	regs := 0
	for _, s := range h.net.take() {
		switch m := s.msg.(type) {
		case *lisp.MapRequest:
			if s.dst != netip.MustParseAddrPort("192.0.2.50:4342") {
				t.Errorf("SMR to %s", s.dst)
			}
			smr = m
		case *lisp.MapRegister:
			regs++
			// Both locators reach the site through 198.51.100.1: the
			// plain RLOC and the ELP that ends there.
			if l := m.Records[0].Locators; l[0].Reachable || l[1].Reachable || !m.Records[1].Locators[0].Reachable {
				t.Errorf("registered %s", m)
			}
		}
	}
	if smr == nil || !smr.SMR || smr.SourceEID.IP() != netip.MustParseAddr("10.1.0.0") ||
		smr.Records[0].EID.IP() != netip.MustParseAddr("10.9.0.1") || smr.ITRRLOCs[0].IP() != rloc {
		t.Errorf("SMR %v", smr)
	}
	if regs != 2 {
		t.Errorf("%d Map-Registers after the change, want one per map-server", regs)
	}
	// A reload that changes the /24 and drops the /16.
	n, err := h.x.Update([]config.DatabaseMapping{{EIDPrefix: "10.1.2.0/24", TTL: config.Duration{Duration: time.Hour},
		Locators: []config.LocatorConfig{{Address: "198.51.100.3", Priority: 1, Weight: 1}}}})
	if err != nil || n != 2 {
		t.Fatalf("Update: %d SMRs, %v; want 2", n, err)
	}
	if h.x.Owns(0, netip.MustParseAddr("10.1.0.1")) || !h.x.Owns(0, netip.MustParseAddr("10.1.2.1")) {
		t.Error("Owns does not follow the update")
	}
	// ITRs are forgotten after a while.
	h.net.take()
	h.now = h.now.Add(itrMemory + time.Second)
	h.x.Tick()
	h.net.take()
	if n := h.x.SetLocatorReachable(netip.MustParseAddr("198.51.100.3"), false); n != 0 {
		t.Errorf("%d SMRs to forgotten ITRs", n)
	}
	if c := h.x.Counters(); c.SMRs != 3 {
		t.Errorf("counters %+v", c)
	}
}
