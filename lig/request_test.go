package lig

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// The request must survive the wire: it is encoded, decoded with
// lisp.Parse, and checked field by field as a map-resolver reads it.
func TestNewRequest(t *testing.T) {
	src := netip.MustParseAddrPort("192.0.2.7:40000")
	src6 := netip.MustParseAddrPort("[2001:db8::7]:40000")
	for _, tc := range []struct {
		name     string
		eid      lisp.Address
		source   netip.AddrPort
		inner    netip.AddrPort // inner source
		dst      string         // inner destination
		maskLen  uint8
		recordIs string
	}{
		{"ipv4", lisp.MustParseAddress("10.2.0.1"), src, src, "10.2.0.1:4342", 32, "10.2.0.1"},
		{"instance id", eidAddress(netip.MustParseAddr("10.2.0.1"), 1000, true), src, src, "10.2.0.1:4342", 32, "[1000]10.2.0.1"},
		{"instance id 0", eidAddress(netip.MustParseAddr("10.2.0.1"), 0, true), src, src, "10.2.0.1:4342", 32, "[0]10.2.0.1"},
		{"ipv6", lisp.MustParseAddress("2001:db8:2::1"), src6, src6, "[2001:db8:2::1]:4342", 128, "2001:db8:2::1"},
		// An IPv6 EID through an IPv4 resolver: the inner header cannot
		// mix families, the ITR-RLOC still says where to reply.
		{"ipv6 eid, ipv4 source", lisp.MustParseAddress("2001:db8:2::1"), src,
			netip.MustParseAddrPort("[::]:40000"), "[2001:db8:2::1]:4342", 128, "2001:db8:2::1"},
		{"ipv4 eid, ipv6 source", lisp.MustParseAddress("10.2.0.1"), src6,
			netip.MustParseAddrPort("0.0.0.0:40000"), "10.2.0.1:4342", 32, "10.2.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ecm, err := NewRequest(tc.eid, tc.source, 0x0123456789abcdef)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := ecm.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := lisp.Parse(wire)
			if err != nil {
				t.Fatal(err)
			}
			got := m.(*lisp.ECM)
			if got.Source != tc.inner || got.Destination.String() != tc.dst || got.ToMS || got.ToETR || got.DDT || got.Security {
				t.Errorf("inner header %s -> %s, flags %+v; want %s -> %s, no flags", got.Source, got.Destination, got, tc.inner, tc.dst)
			}
			req := got.Message.(*lisp.MapRequest)
			if req.Nonce != 0x0123456789abcdef || !req.SourceEID.IsZero() || req.Probe || req.SMR || req.MapReply != nil {
				t.Errorf("map-request %s", req)
			}
			if len(req.ITRRLOCs) != 1 || req.ITRRLOCs[0].IP() != tc.source.Addr() {
				t.Errorf("ITR-RLOCs %v, want [%s]", req.ITRRLOCs, tc.source.Addr())
			}
			if len(req.Records) != 1 || req.Records[0].EID.String() != tc.recordIs || req.Records[0].MaskLen != tc.maskLen {
				t.Errorf("records %v, want %s/%d", req.Records, tc.recordIs, tc.maskLen)
			}
		})
	}
}

func TestNewRequestErrors(t *testing.T) {
	src := netip.MustParseAddrPort("192.0.2.7:40000")
	if _, err := NewRequest(lisp.NameAddress("host"), src, 1); err == nil || err.Error() != `lig: EID "host" has no IP address to send the request to` {
		t.Errorf("name EID: %v", err)
	}
	if _, err := NewRequest(lisp.MustParseAddress("10.0.0.1"), netip.AddrPort{}, 1); err == nil || err.Error() != "lig: no source address for the reply" {
		t.Errorf("no source: %v", err)
	}
}

// Nonces must differ between tries; a constant or zero nonce would let
// anyone answer.
func TestNewNonceVaries(t *testing.T) {
	seen := map[uint64]bool{}
	for range 100 {
		seen[newNonce()] = true
	}
	if len(seen) != 100 {
		t.Errorf("%d distinct nonces of 100", len(seen))
	}
}
