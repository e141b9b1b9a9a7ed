package lig

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// Port is the LISP control port, where map-resolvers listen and where the
// inner header of an encapsulated Map-Request points (RFC 9301 §5.8).
const Port = 4342

// innerTTL is the TTL of the inner IP header. Nothing routes the inner
// packet (the map-resolver reads it and the replier only takes its source
// port), so any value does; 64 is the usual host default.
const innerTTL = 64

// NewRequest builds the Encapsulated Control Message an ITR sends to a
// map-resolver to learn the mapping of eid: a Map-Request with nonce for
// the host route of eid (mask-len 32 or 128), no source EID, and source's
// address as its only ITR-RLOC, inside an inner IP/UDP header from source
// to eid, port 4342.
//
// eid is an IP address, possibly in an Instance-ID LCAF; the inner header
// needs its IP. source is where the Map-Reply must come back: the replier
// sends it to the ITR-RLOC, at the inner UDP source port (RFC 9301 §5.5).
// When source and the EID differ in address family, the inner source is
// the unspecified address of the EID's family, because an IP header cannot
// mix them; repliers answer to the ITR-RLOC, not to the inner source.
func NewRequest(eid lisp.Address, source netip.AddrPort, nonce uint64) (*lisp.ECM, error) {
	ip := eidIP(eid)
	if !ip.IsValid() {
		return nil, fmt.Errorf("lig: EID %s has no IP address to send the request to", eid)
	}
	if !source.Addr().IsValid() {
		return nil, errors.New("lig: no source address for the reply")
	}
	inner := source
	if source.Addr().Is4() != ip.Is4() {
		unspecified := netip.IPv6Unspecified()
		if ip.Is4() {
			unspecified = netip.IPv4Unspecified()
		}
		inner = netip.AddrPortFrom(unspecified, source.Port())
	}
	return &lisp.ECM{
		Source:      inner,
		Destination: netip.AddrPortFrom(ip, Port),
		TTL:         innerTTL,
		Message: &lisp.MapRequest{
			Nonce:    nonce,
			ITRRLOCs: []lisp.Address{lisp.IPAddress(source.Addr())},
			Records:  []lisp.RequestRecord{{EID: eid, MaskLen: uint8(ip.BitLen())}},
		},
	}, nil
}

// eidAddress is ip as a LISP address, in an Instance-ID LCAF when hasIID:
// IID 0 is a valid instance, distinct from no LCAF at all.
func eidAddress(ip netip.Addr, iid uint32, hasIID bool) lisp.Address {
	a := lisp.IPAddress(ip)
	if !hasIID {
		return a
	}
	return lisp.LCAFAddress(&lisp.InstanceID{IID: iid, Address: a})
}

// eidIP is the IP address of an EID, looking inside an Instance-ID LCAF,
// or the invalid address when it has none.
func eidIP(eid lisp.Address) netip.Addr {
	if l, ok := eid.LCAF().(*lisp.InstanceID); ok {
		return l.Address.IP()
	}
	return eid.IP()
}

// newNonce draws a nonce from crypto/rand: the nonce is all that tells a
// genuine Map-Reply from a spoofed one (RFC 9301 §5.2), so it must not be
// guessable.
func newNonce() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return binary.BigEndian.Uint64(b[:])
}
