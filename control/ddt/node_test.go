package ddt

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

const nodeConfig = `
roles: [ddt-node]
ddt-node:
  authoritative-prefixes:
    - prefix: 10.0.0.0/8
    - prefix: 10.64.0.0/10
    - {prefix: 0.0.0.0/0, instance-id: 1000}
    - prefix: 2001:db8::/32
  delegations:
    - {prefix: 10.1.0.0/16, referrals: [192.0.2.11, {address: 192.0.2.12, priority: 2, weight: 10}]}
    - {prefix: 10.1.128.0/17, type: map-server, referrals: [192.0.2.13]}
    - {prefix: 10.2.0.0/16, referrals: ["2001:db8:ffff::2"]}
    - {prefix: 10.3.0.0/16, instance-id: 1000, type: map-server, referrals: [192.0.2.31]}
    - {prefix: "2001:db8:1::/48", referrals: [192.0.2.41]}
`

func newNode(t testing.TB) *Node {
	t.Helper()
	cfg, err := config.Parse([]byte(nodeConfig))
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNode(cfg.DDTNode, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ask is a request record for one address, in instance iid if not 0.
func ask(iid uint32, addr string) lisp.RequestRecord {
	ip := netip.MustParseAddr(addr)
	return lisp.RequestRecord{EID: control.EIDAddress(iid, ip), MaskLen: uint8(ip.BitLen())}
}

// prefixOf reads a record's EID-prefix as "[iid]prefix".
func prefixOf(t *testing.T, rec lisp.ReferralRecord) string {
	t.Helper()
	iid, ip, ok := control.EIDOf(rec.EID)
	if !ok {
		t.Fatalf("record EID %s is not an IP prefix", rec.EID)
	}
	return mapping.EID{IID: iid, Prefix: netip.PrefixFrom(ip, int(rec.MaskLen))}.String()
}

// The node answers each EID as RFC 8111 §7.1 says: the longest
// delegation, the hole around an EID no delegation covers inside an
// authoritative prefix, or not-authoritative, each with the RFC's TTL and
// flags.
func TestNodeRefer(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		name       string
		ask        lisp.RequestRecord
		action     lisp.ReferralAction
		prefix     string
		ttl        uint32
		incomplete bool
		referrals  []string
	}{
		{"child DDT node", ask(0, "10.1.2.3"), lisp.ReferralNode, "10.1.0.0/16", 1440, false, []string{"192.0.2.11", "192.0.2.12"}},
		{"longest delegation", ask(0, "10.1.200.1"), lisp.ReferralMS, "10.1.128.0/17", 1440, false, []string{"192.0.2.13"}},
		{"IPv6 referral RLOC", ask(0, "10.2.0.9"), lisp.ReferralNode, "10.2.0.0/16", 1440, false, []string{"2001:db8:ffff::2"}},
		{"instance ID", ask(1000, "10.3.4.5"), lisp.ReferralMS, "[1000]10.3.0.0/16", 1440, false, []string{"192.0.2.31"}},
		{"IPv6 EID", ask(0, "2001:db8:1::1"), lisp.ReferralNode, "2001:db8:1::/48", 1440, false, []string{"192.0.2.41"}},
		// 10.3.0.0/16 is in another instance: in instance 0 it is a hole,
		// as large as it can be without touching 10.2.0.0/16.
		{"hole between delegations", ask(0, "10.3.0.1"), lisp.ReferralDelegationHole, "10.3.0.0/16", 15, false, nil},
		{"hole far from delegations", ask(0, "10.200.0.1"), lisp.ReferralDelegationHole, "10.128.0.0/9", 15, false, nil},
		// No delegation under 10.64.0.0/10: the hole is the whole
		// authoritative prefix, not more.
		{"hole is the authoritative prefix", ask(0, "10.70.1.1"), lisp.ReferralDelegationHole, "10.64.0.0/10", 15, false, nil},
		{"hole in an instance", ask(1000, "10.4.0.1"), lisp.ReferralDelegationHole, "[1000]10.4.0.0/14", 15, false, nil},
		{"not authoritative", ask(0, "192.0.2.99"), lisp.ReferralNotAuthoritative, "192.0.2.99/32", 0, true, nil},
		{"not authoritative in another instance", ask(7, "10.1.2.3"), lisp.ReferralNotAuthoritative, "[7]10.1.2.3/32", 0, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := n.Refer(tc.ask)
			if rec.Action != tc.action || rec.TTL != tc.ttl || rec.Incomplete != tc.incomplete {
				t.Errorf("action %s ttl %d incomplete %v, want %s %d %v", rec.Action, rec.TTL, rec.Incomplete, tc.action, tc.ttl, tc.incomplete)
			}
			if got := prefixOf(t, rec); got != tc.prefix {
				t.Errorf("prefix %s, want %s", got, tc.prefix)
			}
			if rec.Authoritative == (tc.action == lisp.ReferralNotAuthoritative) {
				t.Errorf("authoritative bit %v for %s", rec.Authoritative, rec.Action)
			}
			if len(rec.Referrals) != len(tc.referrals) {
				t.Fatalf("referrals %v, want %v", rec.Referrals, tc.referrals)
			}
			for i, want := range tc.referrals {
				if r := rec.Referrals[i]; r.Address.String() != want || !r.Reachable {
					t.Errorf("referral %d: %s, want %s reachable", i, r, want)
				}
			}
		})
	}
	if r := n.Refer(ask(0, "10.1.2.3")).Referrals[1]; r.Priority != 2 || r.Weight != 10 {
		t.Errorf("second referral priority/weight %d/%d, want 2/10", r.Priority, r.Weight)
	}
}

// ddtRequest is what a DDT map-resolver sends: the ITR's Map-Request in
// an ECM with the D bit.
func ddtRequest(t testing.TB, nonce uint64, recs ...lisp.RequestRecord) ([]byte, *lisp.ECM) {
	t.Helper()
	e := &lisp.ECM{DDT: true,
		Source: netip.MustParseAddrPort("198.51.100.1:61000"), Destination: netip.MustParseAddrPort("10.1.2.3:4342"), TTL: 64,
		Message: &lisp.MapRequest{Nonce: nonce, ITRRLOCs: []lisp.Address{lisp.MustParseAddress("198.51.100.1")}, Records: recs}}
	raw, err := e.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lisp.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, m.(*lisp.ECM)
}

var resolverAddr = netip.MustParseAddrPort("203.0.113.1:4342")

// referralsIn decodes the Map-Referrals queued in out, by destination.
func referralsIn(t *testing.T, out *control.Outbox) map[netip.AddrPort]*lisp.MapReferral {
	t.Helper()
	got := map[netip.AddrPort]*lisp.MapReferral{}
	for i := range out.Len() {
		dst, b := out.At(i)
		m, err := lisp.Parse(b)
		if err != nil {
			t.Fatalf("datagram to %s does not decode: %v", dst, err)
		}
		if r, ok := m.(*lisp.MapReferral); ok {
			got[dst] = r
		}
	}
	return got
}

// The Map-Referral goes to where the DDT Map-Request came from, with its
// nonce and a record per EID asked, and is counted by action.
func TestNodeHandleECM(t *testing.T) {
	n := newNode(t)
	var out control.Outbox
	_, e := ddtRequest(t, 0x1234, ask(0, "10.1.2.3"), ask(0, "192.0.2.1"))
	n.HandleECM(e, resolverAddr, &out)
	ref := referralsIn(t, &out)[resolverAddr]
	if out.Len() != 1 || ref == nil || ref.Nonce != 0x1234 || len(ref.Records) != 2 ||
		ref.Records[0].Action != lisp.ReferralNode || ref.Records[1].Action != lisp.ReferralNotAuthoritative {
		t.Fatalf("%d datagrams, referral to the resolver: %v", out.Len(), ref)
	}
	e.Message = &lisp.MapReply{Nonce: 1}
	n.HandleECM(e, resolverAddr, &out)
	e.Message = &lisp.MapRequest{Nonce: 2, ITRRLOCs: []lisp.Address{lisp.MustParseAddress("198.51.100.1")}}
	n.HandleECM(e, resolverAddr, &out)
	c := n.Counters()
	if out.Len() != 1 || c.Requests != 3 || c.Referrals[lisp.ReferralNode] != 1 || c.Referrals[lisp.ReferralNotAuthoritative] != 1 ||
		c.Dropped[NotMapRequest] != 1 || c.Dropped[NoRecords] != 1 {
		t.Errorf("%d datagrams, counters %+v", out.Len(), c)
	}
}
