package mapserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

const testConfig = `
roles: [map-server]
map-server:
  registration-timeout: 3m
  sites:
    - name: site-a
      keys:
        - {id: 0, secret: key-a}
        - {id: 1, algorithm: hmac-sha1, secret: key-a-sha1}
      eid-prefixes:
        - {prefix: 10.1.0.0/16}
        - {prefix: 10.8.0.0/13, accept-more-specifics: true}
        - {prefix: 10.1.0.0/16, instance-id: 1000}
    - name: site-b
      keys: [{id: 0, secret: key-b}]
      proxy-reply: false
      eid-prefixes: [{prefix: 2001:db8:b::/48}]
    - name: open
      allow-unauthenticated: true
      eid-prefixes: [{prefix: 192.168.0.0/16}]
`

type clock struct {
	t      time.Time
	stamps control.TimeNonces
}

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// nonce is the nonce of a Map-Register sent now, as lispd's xTRs make it.
func (c *clock) nonce() uint64 { return c.stamps.Next(c.t) }

// testClock is the clock of the server newServer made last: register
// gives Map-Registers without a nonce one of its time, since anti-replay
// is on for the sites of testConfig.
var testClock *clock

func newServer(t *testing.T) (*Server, *clock) {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg.MapServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	s.SetClock(c.now)
	testClock = c
	return s, c
}

var (
	etr1 = netip.MustParseAddrPort("192.0.2.1:61001")
	etr2 = netip.MustParseAddrPort("192.0.2.2:61002")
)

func record(eid string, rlocs ...lisp.Address) lisp.MapRecord {
	p := netip.MustParsePrefix(eid)
	rec := lisp.MapRecord{TTL: 3, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()), Authoritative: true}
	for _, a := range rlocs {
		rec.Locators = append(rec.Locators, lisp.Locator{Priority: 1, Weight: 50, Reachable: true, Address: a})
	}
	return rec
}

// checkWire checks that a proxy answer's record encoded once is the
// record it answers with.
func checkWire(t *testing.T, ans mapping.Answer) bool {
	t.Helper()
	want, err := ans.Record.AppendBinary(nil)
	if err != nil || ans.Kind != mapping.Mapping || !bytes.Equal(ans.Wire, want) {
		t.Errorf("%s: record encoded once %x, encoded now %x (%v)", ans.Kind, ans.Wire, want, err)
		return false
	}
	return true
}

// resolve is s.Resolve, checking that AppendMapping, the map-resolver's
// path for most Map-Requests, agrees with it: the record of a mapping
// appended, and nothing for any other answer.
func resolve(t *testing.T, s *Server, iid uint32, eid netip.Addr) mapping.Answer {
	t.Helper()
	ans := s.Resolve(iid, eid)
	head := []byte("head")
	b, ok := s.AppendMapping(head[:len(head):len(head)], iid, eid)
	switch {
	case ok != (ans.Kind == mapping.Mapping):
		t.Errorf("AppendMapping([%d]%s) = %v for a %s answer", iid, eid, ok, ans.Kind)
	case ok && !bytes.Equal(b, append([]byte("head"), ans.Wire...)):
		t.Errorf("AppendMapping([%d]%s) = %x, the answer's record is %x", iid, eid, b, ans.Wire)
	case !ok && !bytes.Equal(b, head):
		t.Errorf("AppendMapping([%d]%s) appended %x for a %s answer", iid, eid, b, ans.Kind)
	}
	return ans
}

func register(t *testing.T, m *lisp.MapRegister, key string) []byte {
	t.Helper()
	if m.Nonce == 0 && testClock != nil {
		m.Nonce = testClock.nonce()
	}
	if m.Auth.Algorithm == 0 && key != "" {
		m.Auth.Algorithm = lisp.AuthHMACSHA256
	}
	b, err := m.AppendSigned(nil, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegisterNotifyAndProxyReply(t *testing.T) {
	s, _ := newServer(t)
	elp := lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{{}, lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("198.51.100.1"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("198.51.100.2"), Strict: true},
	}})}})
	rec := record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"), elp)
	var out control.Outbox
	mr := &lisp.MapRegister{
		ProxyReply: true, WantMapNotify: true, Records: []lisp.MapRecord{rec},
		XTRID: &lisp.XTRID{ID: [16]byte{1}, SiteID: 9},
	}
	s.HandleRegister(register(t, mr, "key-a"), etr1, &out)

	if got := s.Counters().Registers[Accepted]; got != 1 {
		t.Fatalf("accepted = %d", got)
	}
	// The Map-Notify goes back to the ETR, authenticated, with the nonce,
	// records and xTR-ID of the Map-Register.
	if out.Len() != 1 {
		t.Fatalf("%d datagrams queued, want the Map-Notify", out.Len())
	}
	dst, b := out.At(0)
	if dst != etr1 || lisp.Verify(b, []byte("key-a")) != nil {
		t.Fatalf("Map-Notify to %s verifies: %v", dst, lisp.Verify(b, []byte("key-a")))
	}
	m, err := lisp.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	// The records as registered, the path in the AFI list it came in.
	n := m.(*lisp.MapNotify)
	if n.Nonce != mr.Nonce || n.XTRID == nil || *n.XTRID != *mr.XTRID || !reflect.DeepEqual(n.Records, mr.Records) {
		t.Errorf("Map-Notify = %s, for %s", n, mr)
	}
	// A proxy answer carries the registered locators, the path as a bare
	// ELP, with the proxy TTL and A clear.
	ans := resolve(t, s, 0, netip.MustParseAddr("10.1.2.3"))
	if ans.Kind != mapping.Mapping || ans.EID.String() != "10.1.0.0/16" || !checkWire(t, ans) {
		t.Fatalf("Resolve = %+v", ans)
	}
	want := slices.Clone(rec.Locators)
	want[1].Address = lisp.LCAFAddress(lisp.PathOf(elp))
	if !reflect.DeepEqual(ans.Record.Locators, want) || ans.Record.TTL != 1440 || ans.Record.Authoritative {
		t.Errorf("proxy record = %s", &ans.Record)
	}
}

// Proxy replies send a path as a bare ELP LCAF whatever form its ETR
// registered it in: bare, lispers.net's AFI List of AFI 0 and the ELP,
// or an AFI List of an address and the ELP; two ETRs that register the
// same path in two forms give one locator. The reply's bytes are checked:
// the locator's address is LCAF type 10 itself.
func TestProxyRepliesSendBareELPs(t *testing.T) {
	path := &lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("198.51.100.1"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("198.51.100.2"), Strict: true},
	}}
	inList := func(first lisp.Address) lisp.Address {
		return lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{first, lisp.LCAFAddress(path)}})
	}
	for name, forms := range map[string][]lisp.Address{
		"bare":                 {lisp.LCAFAddress(path)},
		"AFI List, AFI 0":      {inList(lisp.Address{})},
		"AFI List, address":    {inList(lisp.MustParseAddress("198.51.100.2"))},
		"two ETRs, two forms":  {inList(lisp.Address{}), lisp.LCAFAddress(path)},
		"two ETRs, both lists": {inList(lisp.Address{}), inList(lisp.Address{})},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newServer(t)
			var out control.Outbox
			for i, a := range forms {
				s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, MergeRequest: true,
					Records: []lisp.MapRecord{record("10.1.0.0/16", a)}}, "key-a"), []netip.AddrPort{etr1, etr2}[i], &out)
			}
			ans := resolve(t, s, 0, netip.MustParseAddr("10.1.2.3"))
			if ans.Kind != mapping.Mapping || len(ans.Record.Locators) != 1 {
				t.Fatalf("Resolve = %+v", ans)
			}
			b, err := (&lisp.MapReply{Nonce: 1, Records: []lisp.MapRecord{ans.Record}}).AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			// Map-Reply header 12, record 16 with its IPv4 EID, locator 6.
			loc := b[12+16+6:]
			wantELP := []byte{0x40, 0x03, 0, 0, byte(lisp.LCAFELP), 0, 0, 16}
			if !bytes.HasPrefix(loc, wantELP) || len(loc) != 8+16 {
				t.Errorf("locator address %x, want the bare ELP %x and its 16 bytes of hops", loc, wantELP)
			}
		})
	}
}

func TestForwardWithoutProxyReply(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	// The ETR does not ask for proxy replies.
	s.HandleRegister(register(t, &lisp.MapRegister{Records: []lisp.MapRecord{
		record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1")),
	}}, "key-a"), etr1, &out)
	if ans := resolve(t, s, 0, netip.MustParseAddr("10.1.9.9")); ans.Kind != mapping.Forward || ans.ETR != etr1.Addr() {
		t.Errorf("Resolve = %+v, want forward to %s", ans, etr1.Addr())
	}
	if out.Len() != 0 {
		t.Error("a Map-Notify was sent though M was clear")
	}
	// Site b does not allow proxy replies even when the ETR asks.
	s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{
		record("2001:db8:b::/48", lisp.MustParseAddress("2001:db8::1")),
	}}, "key-b"), etr2, &out)
	if ans := resolve(t, s, 0, netip.MustParseAddr("2001:db8:b::1")); ans.Kind != mapping.Forward {
		t.Errorf("site without proxy replies: Resolve = %+v", ans)
	}
}

// Each refusal is counted by its reason and leaves the state as it was.
func TestRefusalsLeaveStateUnchanged(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{
		record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1")),
	}}, "key-a"), etr1, &out)
	before := status(t, s)
	attacker := lisp.MustParseAddress("203.0.113.66")
	hijack := func(eid string) []lisp.MapRecord { return []lisp.MapRecord{record(eid, attacker)} }
	signedWrongKey := register(t, &lisp.MapRegister{Records: hijack("10.1.0.0/16")}, "guess")
	tampered := register(t, &lisp.MapRegister{Records: hijack("10.1.0.0/16")}, "key-a")
	tampered[len(tampered)-1] ^= 1 // the RLOC changed after signing
	for _, tc := range []struct {
		name   string
		msg    []byte
		reason Reason
	}{
		{"wrong key", signedWrongKey, AuthFailed},
		{"altered after signing", tampered, AuthFailed},
		{"unknown key ID", register(t, &lisp.MapRegister{Auth: lisp.Auth{KeyID: 7, Algorithm: lisp.AuthHMACSHA256},
			Records: hijack("10.1.0.0/16")}, "key-a"), UnknownKey},
		{"algorithm 0", register(t, &lisp.MapRegister{Records: hijack("10.1.0.0/16")}, ""), Unauthenticated},
		{"unknown site", register(t, &lisp.MapRegister{Records: hijack("172.16.0.0/16")}, "key-a"), UnknownSite},
		{"more-specific not accepted", register(t, &lisp.MapRegister{Records: hijack("10.1.1.0/24")}, "key-a"), UnknownSite},
		{"second record in another site", register(t, &lisp.MapRegister{Records: append(hijack("10.1.0.0/16"),
			hijack("2001:db8:b::/48")...)}, "key-a"), OutsideSite},
		{"second record outside every site", register(t, &lisp.MapRegister{Records: append(hijack("10.1.0.0/16"),
			hijack("172.16.0.0/16")...)}, "key-a"), OutsideSite},
		{"no records", register(t, &lisp.MapRegister{}, "key-a"), NoRecords},
		{"name EID", register(t, &lisp.MapRegister{Records: []lisp.MapRecord{{EID: lisp.NameAddress("x")}}}, "key-a"), UnsupportedEID},
		{"truncated", signedWrongKey[:30], Malformed},
		{"oversized", append(signedWrongKey, make([]byte, 100)...), Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was := s.Counters().Registers[tc.reason]
			s.HandleRegister(tc.msg, netip.MustParseAddrPort("203.0.113.66:4342"), &out)
			if got := s.Counters().Registers[tc.reason]; got != was+1 {
				t.Errorf("%s counter = %d, want %d", tc.reason, got, was+1)
			}
			if after := status(t, s); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
			if out.Len() != 0 {
				t.Errorf("refused Map-Register answered")
			}
		})
	}
}

func status(t *testing.T, s *Server) string {
	t.Helper()
	b, err := json.Marshal(s.Status())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUnauthenticatedOnlyWhereAllowed(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	s.HandleRegister(register(t, &lisp.MapRegister{Records: []lisp.MapRecord{
		record("192.168.0.0/16", lisp.MustParseAddress("192.0.2.9")),
	}}, ""), etr1, &out)
	if s.Counters().Registers[Accepted] != 1 {
		t.Fatal("the open site refused an unauthenticated Map-Register")
	}
}

// The Map-Notify echoes the Map-Register's records and authentication
// section, signed anew: with the full HMAC when the ETR sent one
// truncated to the algorithm's nominal length, and with none when it sent
// none.
func TestNotifyAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		alg       lisp.AuthAlgorithm
		sent      int // bytes of HMAC in the Map-Register
		want      int // in the Map-Notify
	}{
		{"full", "key-a", lisp.AuthHMACSHA256, 32, 32},
		{"truncated", "key-a", lisp.AuthHMACSHA256, 16, 32},
		{"sha1-truncated", "key-a-sha1", lisp.AuthHMACSHA1, 12, 20},
		{"none", "", lisp.AuthNone, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			prefix := "10.9.1.0/24"
			if tc.alg == lisp.AuthNone {
				prefix = "192.168.0.0/16" // the site open to unauthenticated xTRs
			}
			mr := &lisp.MapRegister{WantMapNotify: true, Nonce: testClock.nonce(),
				Records: []lisp.MapRecord{record(prefix, lisp.MustParseAddress("192.0.2.1"))}}
			if tc.alg == lisp.AuthHMACSHA1 {
				mr.Auth.KeyID = 1
			}
			mr.Auth.Algorithm = tc.alg
			mr.Auth.Data = make([]byte, tc.sent)
			raw, err := mr.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.alg != lisp.AuthNone { // the HMAC, of the message with its data zeroed, truncated
				h := sha256.New
				if tc.alg == lisp.AuthHMACSHA1 {
					h = sha1.New
				}
				mac := hmac.New(h, []byte(tc.key))
				mac.Write(raw)
				copy(raw[16:], mac.Sum(nil)[:tc.sent])
			}
			var out control.Outbox
			s.HandleRegister(raw, etr1, &out)
			if out.Len() != 1 {
				t.Fatalf("%d datagrams for an accepted Map-Register (counters %+v)", out.Len(), s.Counters().Registers)
			}
			_, b := out.At(0)
			m, err := lisp.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			n := m.(*lisp.MapNotify)
			if n.Nonce != mr.Nonce || n.Auth.Algorithm != tc.alg || len(n.Auth.Data) != tc.want || !reflect.DeepEqual(n.Records, mr.Records) {
				t.Errorf("Map-Notify = %s (%d bytes of HMAC), for %s", n, len(n.Auth.Data), mr)
			}
			if tc.alg != lisp.AuthNone {
				if err := lisp.Verify(b, []byte(tc.key)); err != nil {
					t.Errorf("Map-Notify verifies: %v", err)
				}
			}
		})
	}
}

func TestMoreSpecificsAndSHA1(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	m := &lisp.MapRegister{Auth: lisp.Auth{KeyID: 1, Algorithm: lisp.AuthHMACSHA1}, ProxyReply: true,
		Records: []lisp.MapRecord{record("10.9.1.0/24", lisp.MustParseAddress("192.0.2.1"))}}
	s.HandleRegister(register(t, m, "key-a-sha1"), etr1, &out)
	if ans := resolve(t, s, 0, netip.MustParseAddr("10.9.1.1")); ans.Kind != mapping.Mapping || ans.EID.String() != "10.9.1.0/24" {
		t.Fatalf("more-specific under an accept-more-specifics prefix: %+v", ans)
	}
	// Elsewhere in that prefix: unregistered, and the negative prefix
	// stays clear of the registered /24.
	if ans := resolve(t, s, 0, netip.MustParseAddr("10.9.2.1")); ans.Kind != mapping.Unregistered || ans.EID.String() != "10.9.2.0/23" {
		t.Errorf("unregistered part of a site: %+v", ans)
	}
}

func TestNegativeAnswers(t *testing.T) {
	s, _ := newServer(t)
	for _, tc := range []struct {
		iid  uint32
		eid  string
		kind mapping.AnswerKind
		neg  string
	}{
		{0, "10.1.2.3", mapping.Unregistered, "10.1.0.0/16"},
		{1000, "10.1.2.3", mapping.Unregistered, "[1000]10.1.0.0/16"},
		{0, "10.0.0.1", mapping.NotFound, "10.0.0.0/16"},          // shares 15 bits with 10.1/16
		{7, "10.1.2.3", mapping.NotFound, "[7]0.0.0.0/0"},         // nothing in instance 7
		{0, "2001:db8:a::1", mapping.NotFound, "2001:db8:a::/48"}, // next to 2001:db8:b::/48
	} {
		ans := resolve(t, s, tc.iid, netip.MustParseAddr(tc.eid))
		if ans.Kind != tc.kind || ans.EID.String() != tc.neg {
			t.Errorf("Resolve([%d]%s) = %s %s, want %s %s", tc.iid, tc.eid, ans.Kind, ans.EID, tc.kind, tc.neg)
		}
	}
}

func TestMergeAndReplace(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	reg := func(src netip.AddrPort, id byte, merge bool, rlocs ...string) {
		t.Helper()
		var addrs []lisp.Address
		for _, r := range rlocs {
			addrs = append(addrs, lisp.MustParseAddress(r))
		}
		s.HandleRegister(register(t, &lisp.MapRegister{
			ProxyReply: true, MergeRequest: merge, XTRID: &lisp.XTRID{ID: [16]byte{id}, SiteID: 1},
			Records: []lisp.MapRecord{record("10.1.0.0/16", addrs...)},
		}, "key-a"), src, &out)
	}
	rlocs := func() []string {
		ans := resolve(t, s, 0, netip.MustParseAddr("10.1.0.1"))
		checkWire(t, ans)
		var got []string
		for _, l := range ans.Record.Locators {
			got = append(got, l.Address.String())
		}
		return got
	}
	reg(etr1, 1, true, "192.0.2.1")
	reg(etr2, 2, true, "192.0.2.2", "192.0.2.1")
	if got := rlocs(); !reflect.DeepEqual(got, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Fatalf("merged RLOCs = %v", got)
	}
	// ETR 1 changes its part only, and keeps its place.
	reg(etr1, 1, true, "192.0.2.11")
	if got := rlocs(); !reflect.DeepEqual(got, []string{"192.0.2.11", "192.0.2.2", "192.0.2.1"}) {
		t.Fatalf("after ETR 1 re-registered: %v", got)
	}
	// Without the merge bit an ETR's set replaces everything.
	reg(etr1, 1, false, "192.0.2.99")
	if got := rlocs(); !reflect.DeepEqual(got, []string{"192.0.2.99"}) {
		t.Fatalf("after a replacing registration: %v", got)
	}
	if st := s.Status(); len(st.Sites[0].Registrations[0].ETRs) != 1 {
		t.Errorf("ETRs after replacement: %+v", st.Sites[0].Registrations[0].ETRs)
	}
}

// A refresh of what the one ETR registered keeps the answer and moves
// the expiry on; a refresh that changes anything an answer carries (the
// map-version, the action, a locator, the P bit) changes the answer.
func TestRefresh(t *testing.T) {
	s, clk := newServer(t)
	var out control.Outbox
	eid := netip.MustParseAddr("10.1.0.1")
	rec := record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"))
	reg := func(proxy bool, rec lisp.MapRecord) {
		t.Helper()
		s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: proxy, XTRID: &lisp.XTRID{ID: [16]byte{1}},
			Records: []lisp.MapRecord{rec}}, "key-a"), etr1, &out)
	}
	reg(true, rec)
	first := resolve(t, s, 0, eid)
	checkWire(t, first)
	for range 3 {
		clk.advance(2 * time.Minute)
		reg(true, rec)
		if n := s.Expire(); n != 0 {
			t.Fatalf("Expire dropped %d refreshed registrations", n)
		}
		if ans := resolve(t, s, 0, eid); !reflect.DeepEqual(ans, first) {
			t.Fatalf("after a refresh %+v, before %+v", ans, first)
		}
	}
	if etrs := s.Status().Sites[0].Registrations[0].ETRs; len(etrs) != 1 || etrs[0].Registers != 4 ||
		!etrs[0].Expires.Equal(clk.now().Add(3*time.Minute)) {
		t.Fatalf("ETRs after three refreshes: %+v", etrs)
	}
	changes := []struct {
		name   string
		change func(*lisp.MapRecord)
		check  func(mapping.Answer) bool
	}{
		{"map-version", func(r *lisp.MapRecord) { r.MapVersion = 7 },
			func(a mapping.Answer) bool { return a.Record.MapVersion == 7 }},
		{"action", func(r *lisp.MapRecord) { r.Action = lisp.ActionDrop },
			func(a mapping.Answer) bool { return a.Record.Action == lisp.ActionDrop }},
		{"priority", func(r *lisp.MapRecord) { r.Locators[0].Priority = 9 },
			func(a mapping.Answer) bool { return a.Record.Locators[0].Priority == 9 }},
		{"RLOC", func(r *lisp.MapRecord) { r.Locators[0].Address = lisp.MustParseAddress("192.0.2.9") },
			func(a mapping.Answer) bool {
				return a.Record.Locators[0].Address.IP() == netip.MustParseAddr("192.0.2.9")
			}},
	}
	for _, c := range changes {
		rec.Locators = slices.Clone(rec.Locators)
		c.change(&rec)
		reg(true, rec)
		if ans := resolve(t, s, 0, eid); !c.check(ans) || !checkWire(t, ans) {
			t.Errorf("after a refresh with a new %s: %s", c.name, &ans.Record)
		}
	}
	reg(false, rec)
	if ans := resolve(t, s, 0, eid); ans.Kind != mapping.Forward {
		t.Errorf("after a refresh without the P bit: %s answer", ans.Kind)
	}
}

func TestExpiry(t *testing.T) {
	s, clk := newServer(t)
	var out control.Outbox
	reg := func(src netip.AddrPort, id byte, ttl uint32, useTTL bool) {
		rec := record("10.1.0.0/16", lisp.IPAddress(src.Addr()))
		rec.TTL = ttl
		s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, MergeRequest: true, UseTTL: useTTL,
			XTRID: &lisp.XTRID{ID: [16]byte{id}}, Records: []lisp.MapRecord{rec}}, "key-a"), src, &out)
	}
	reg(etr1, 1, 3, false) // the configured 3 minutes
	reg(etr2, 2, 10, true) // T: its record TTL, 10 minutes
	clk.advance(2 * time.Minute)
	reg(etr1, 1, 3, false) // refreshed: now due at 5 minutes
	clk.advance(2*time.Minute + time.Second)
	if n := s.Expire(); n != 0 {
		t.Fatalf("at 4m01 Expire dropped %d", n)
	}
	clk.advance(time.Minute)
	if n := s.Expire(); n != 1 {
		t.Fatalf("at 5m01 Expire dropped %d, want ETR 1", n)
	}
	if ans := resolve(t, s, 0, netip.MustParseAddr("10.1.0.1")); len(ans.Record.Locators) != 1 ||
		ans.Record.Locators[0].Address.IP() != etr2.Addr() || !checkWire(t, ans) {
		t.Fatalf("after ETR 1 expired: %+v", ans)
	}
	clk.advance(5 * time.Minute)
	if n := s.Expire(); n != 1 {
		t.Fatalf("at 10m01 Expire dropped %d, want ETR 2", n)
	}
	if ans := resolve(t, s, 0, netip.MustParseAddr("10.1.0.1")); ans.Kind != mapping.Unregistered {
		t.Fatalf("after every ETR expired: %+v", ans)
	}
	if c := s.Counters(); c.Expired != 2 || c.Registrations != 0 || s.expiry.Len() != 0 {
		t.Errorf("counters %+v, %d timers left", c, s.expiry.Len())
	}
}

func TestDeregistration(t *testing.T) {
	s, _ := newServer(t)
	var out control.Outbox
	rec := record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"))
	s.HandleRegister(register(t, &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{rec}}, "key-a"), etr1, &out)
	rec.TTL = 0
	s.HandleRegister(register(t, &lisp.MapRegister{Records: []lisp.MapRecord{rec}}, "key-a"), etr1, &out)
	if c := s.Counters(); c.Registrations != 0 || s.expiry.Len() != 0 {
		t.Errorf("after TTL 0: %d registrations, %d timers", c.Registrations, s.expiry.Len())
	}
}

// raceEnabled: built with -race (race_test.go).
var raceEnabled bool

// A new prefix registered with one locator allocates one object, the
// registration with room for its ETR and locator; a refresh allocates
// nothing. A registration's allocations are memory the kernel maps as
// registrations come in, the largest part of a Map-Register's cost.
func TestRegisterAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what allocates")
	}
	s, _ := newServer(t)
	const warm, runs = 200, 100 // warm: the index's and queue's early growth
	var fresh, again [][]byte
	for i := range warm + runs + 1 {
		rec := record(fmt.Sprintf("10.8.%d.%d/32", i/256, i%256), lisp.MustParseAddress("192.0.2.1"))
		fresh = append(fresh, register(t, &lisp.MapRegister{WantMapNotify: true, Records: []lisp.MapRecord{rec}}, "key-a"))
	}
	for range runs + 1 {
		rec := record("10.9.0.0/24", lisp.MustParseAddress("192.0.2.1"))
		again = append(again, register(t, &lisp.MapRegister{WantMapNotify: true, Records: []lisp.MapRecord{rec}}, "key-a"))
	}
	var out control.Outbox
	handle := func(msgs [][]byte) func() {
		i := 0
		return func() {
			out.Reset()
			s.HandleRegister(msgs[i], etr1, &out)
			if i++; out.Len() != 1 {
				t.Fatalf("Map-Register %d refused", i)
			}
		}
	}
	for _, m := range fresh[:warm] {
		out.Reset()
		s.HandleRegister(m, etr1, &out)
	}
	if n := testing.AllocsPerRun(runs, handle(fresh[warm:])); n > 1 {
		t.Errorf("a new registration: %.0f allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(runs, handle(again)); n != 0 {
		t.Errorf("a refresh: %.0f allocations, want 0", n)
	}
}
