package resolver

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// FuzzHandleReferral feeds the DDT resolver arbitrary Map-Referrals for
// a pending request: it may refuse them, but never panic, and what it
// sends must decode.
func FuzzHandleReferral(f *testing.F) {
	set := []lisp.Locator{{Reachable: true, Address: lisp.MustParseAddress("192.0.2.11")}}
	for _, rec := range []lisp.ReferralRecord{
		{TTL: 1440, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16, Action: lisp.ReferralNode, Referrals: set},
		{TTL: 15, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16, Action: lisp.ReferralDelegationHole},
		{TTL: 1, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 24, Action: lisp.ReferralMSNotRegistered, Incomplete: true},
		{EID: lisp.MustParseAddress("10.1.0.7"), MaskLen: 32, Action: lisp.ReferralNotAuthoritative, Incomplete: true},
	} {
		b, err := (&lisp.MapReferral{Nonce: 1, Records: []lisp.ReferralRecord{rec}}).AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n := newDDTNet(t, "")
		n.nowhere = true // the referrals name any address
		n.dead[addr("192.0.2.1")], n.dead[addr("192.0.2.2")] = true, true
		n.request("10.1.0.7", 1)
		// deliver fails the test on anything sent that does not decode.
		for _, root := range []string{"192.0.2.1", "192.0.2.2"} {
			var out control.Outbox
			n.r.HandleReferral(raw, netip.AddrPortFrom(addr(root), 4342), &out)
			n.deliver(resolverRLOC, &out)
		}
	})
}
