package ddt

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/lisp"
)

const msConfig = `
roles: [map-server]
map-server:
  sites:
    - name: proxied
      keys: [{id: 0, secret: key-p}]
      eid-prefixes: [{prefix: 10.1.0.0/16}, {prefix: 10.5.0.0/16}]
    - name: forwarded
      keys: [{id: 0, secret: key-f}]
      eid-prefixes: [{prefix: 10.2.0.0/16}]
`

// newMapServer runs a real map-server with site "proxied" registered for
// proxy replies (10.1.0.0/16) and site "forwarded" registered without
// (10.2.0.0/16), and its DDT side configured by ddt (YAML, may be "").
func newMapServer(t testing.TB, ddt string) *MapServer {
	t.Helper()
	cfg, err := config.Parse([]byte(msConfig + ddt))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mapserver.New(cfg.MapServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		prefix, key, rloc string
		proxy             bool
	}{{"10.1.0.0/16", "key-p", "192.0.2.1", true}, {"10.2.0.0/16", "key-f", "192.0.2.2", false}} {
		p := netip.MustParsePrefix(r.prefix)
		reg := &lisp.MapRegister{ProxyReply: r.proxy, Nonce: control.TimeNonce(time.Now()), Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 3, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()),
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress(r.rloc)}}}}}
		raw, err := reg.AppendSigned(nil, []byte(r.key))
		if err != nil {
			t.Fatal(err)
		}
		var out control.Outbox
		ms.HandleRegister(raw, netip.AddrPortFrom(netip.MustParseAddr(r.rloc), 4342), &out)
	}
	if c := ms.Counters(); c.Registrations != 2 {
		t.Fatalf("%d registrations, want 2", c.Registrations)
	}
	return NewMapServer(cfg.MapServer, ms, nil)
}

const withPeers = `
  ddt:
    authoritative-prefixes: [{prefix: 10.0.0.0/12}]
    peers: [192.0.2.100, 192.0.2.101]
`

// A registered EID gets its Map-Reply (or its ETR the request) and the
// map-resolver an MS-ACK with the peers as referral set.
func TestMapServerAck(t *testing.T) {
	ms := newMapServer(t, withPeers)
	t.Run("proxy reply", func(t *testing.T) {
		var out control.Outbox
		raw, e := ddtRequest(t, 7, ask(0, "10.1.2.3"))
		ms.HandleECM(raw, e, resolverAddr, &out)
		if out.Len() != 2 {
			t.Fatalf("%d datagrams, want the Map-Reply and the Map-Referral", out.Len())
		}
		dst, b := out.At(0)
		m, err := lisp.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if reply, ok := m.(*lisp.MapReply); !ok || dst != netip.MustParseAddrPort("198.51.100.1:61000") || reply.Nonce != 7 ||
			reply.Records[0].Locators[0].Address.String() != "192.0.2.1" {
			t.Errorf("to %s: %s, want the proxy Map-Reply to the ITR's RLOC and inner port", dst, m)
		}
		ref := referralsIn(t, &out)[resolverAddr]
		rec := ref.Records[0]
		if ref.Nonce != 7 || rec.Action != lisp.ReferralMSAck || rec.TTL != 1440 || rec.Incomplete || prefixOf(t, rec) != "10.1.0.0/16" ||
			len(rec.Referrals) != 2 || rec.Referrals[1].Address.String() != "192.0.2.101" {
			t.Errorf("referral %s", ref)
		}
	})
	t.Run("forward to the ETR", func(t *testing.T) {
		var out control.Outbox
		raw, e := ddtRequest(t, 8, ask(0, "10.2.0.1"))
		e.ToMS = true
		raw[0] |= 0x01 // M: the map-resolver sent it to a map-server
		ms.HandleECM(raw, e, resolverAddr, &out)
		if out.Len() != 2 {
			t.Fatalf("%d datagrams, want the forwarded request and the Map-Referral", out.Len())
		}
		dst, b := out.At(0)
		m, err := lisp.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		fwd, ok := m.(*lisp.ECM)
		if !ok || dst != netip.MustParseAddrPort("192.0.2.2:4342") || !fwd.ToETR || fwd.DDT || fwd.ToMS ||
			fwd.Source != e.Source || fwd.Message.(*lisp.MapRequest).Nonce != 8 {
			t.Errorf("to %s: %s, want the ECM to the ETR, E set and D, M clear", dst, m)
		}
		if rec := referralsIn(t, &out)[resolverAddr].Records[0]; rec.Action != lisp.ReferralMSAck || prefixOf(t, rec) != "10.2.0.0/16" {
			t.Errorf("referral record %+v", rec)
		}
	})
	t.Run("referral only", func(t *testing.T) {
		var out control.Outbox
		raw, e := ddtRequest(t, 9, ask(0, "10.1.2.3"))
		e.Message.(*lisp.MapRequest).DontMapReply = true
		ms.HandleECM(raw, e, resolverAddr, &out)
		if ref := referralsIn(t, &out)[resolverAddr]; out.Len() != 1 || ref.Records[0].Action != lisp.ReferralMSAck {
			t.Errorf("%d datagrams, referral %v: want the MS-ACK only", out.Len(), ref)
		}
	})
	if c := ms.Counters(); c.Requests != 3 || c.Proxied != 1 || c.Forwarded != 1 || c.Referrals[lisp.ReferralMSAck] != 3 {
		t.Errorf("counters %+v", c)
	}
}

// What the map-server has no registration for is refused with the
// negative referral that says why.
func TestMapServerNegative(t *testing.T) {
	for _, tc := range []struct {
		name, ddt, eid string
		action         lisp.ReferralAction
		prefix         string
		ttl            uint32
		incomplete     bool
		referrals      int
	}{
		{"not registered, peers known", withPeers, "10.5.1.1", lisp.ReferralMSNotRegistered, "10.5.0.0/16", 1, false, 2},
		{"not registered, no peers", "", "10.5.1.1", lisp.ReferralMSNotRegistered, "10.5.0.0/16", 1, true, 0},
		// Inside 10.0.0.0/12 but in no site: the hole around 10.8.0.1
		// that overlaps no site, no larger than the authority.
		{"hole", withPeers, "10.8.0.1", lisp.ReferralDelegationHole, "10.8.0.0/13", 15, false, 0},
		{"outside the authority", withPeers, "10.200.0.1", lisp.ReferralNotAuthoritative, "10.200.0.1/32", 0, true, 0},
		// Without ddt, the map-server is authoritative for its sites only.
		{"outside the sites", "", "10.8.0.1", lisp.ReferralNotAuthoritative, "10.8.0.1/32", 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newMapServer(t, tc.ddt)
			var out control.Outbox
			raw, e := ddtRequest(t, 5, ask(0, tc.eid))
			ms.HandleECM(raw, e, resolverAddr, &out)
			ref := referralsIn(t, &out)[resolverAddr]
			if out.Len() != 1 || ref == nil {
				t.Fatalf("%d datagrams, want only the Map-Referral", out.Len())
			}
			rec := ref.Records[0]
			if rec.Action != tc.action || prefixOf(t, rec) != tc.prefix || rec.TTL != tc.ttl || rec.Incomplete != tc.incomplete ||
				len(rec.Referrals) != tc.referrals {
				t.Errorf("got %s", ref)
			}
		})
	}
}

// An Authority sends what its map-server is authoritative for to the
// map-server and the rest to its DDT node.
func TestAuthorityDispatch(t *testing.T) {
	a := &Authority{Node: newNode(t), MapServer: newMapServer(t, "")}
	var out control.Outbox
	for _, eid := range []string{"10.1.2.3", "10.3.0.1"} {
		raw, e := ddtRequest(t, 1, ask(0, eid))
		a.HandleECM(raw, e, resolverAddr, &out)
	}
	c := a.Counters()
	if c.Requests != 2 || c.Referrals[lisp.ReferralMSAck] != 1 || c.Referrals[lisp.ReferralDelegationHole] != 1 {
		t.Errorf("counters %+v: want an MS-ACK from the map-server and a hole from the node", c)
	}
}
