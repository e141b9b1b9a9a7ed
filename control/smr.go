package control

import (
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// EncodeSMR builds a Solicit-Map-Request (RFC 9301 §6.1) to the ITR at
// to: a Map-Request with the S bit whose source EID is the prefix whose
// mapping changed, asking about the ITR's own EID when it gave one
// (askedIID, asked; else the changed prefix), with the local RLOCs of the
// ITR's family first (the unspecified address when there are none: the
// ITR refreshes through its map-resolvers, not from the sender).
func EncodeSMR(changed mapping.EID, askedIID uint32, asked netip.Addr, rlocs []netip.Addr, to netip.Addr) ([]byte, error) {
	var itrs []lisp.Address
	for _, same := range []bool{true, false} {
		for _, a := range rlocs {
			if a = a.Unmap(); (a.Is4() == to.Is4()) == same && len(itrs) < lisp.MaxITRRLOCs {
				itrs = append(itrs, lisp.IPAddress(a))
			}
		}
	}
	if len(itrs) == 0 {
		itrs = []lisp.Address{lisp.IPAddress(netip.IPv4Unspecified())}
		if to.Is6() {
			itrs[0] = lisp.IPAddress(netip.IPv6Unspecified())
		}
	}
	record := lisp.RequestRecord{EID: EIDAddress(changed.IID, changed.Prefix.Addr()), MaskLen: uint8(changed.Prefix.Bits())}
	if asked.IsValid() {
		record = lisp.RequestRecord{EID: EIDAddress(askedIID, asked), MaskLen: uint8(asked.BitLen())}
	}
	req := lisp.MapRequest{
		SMR:       true,
		Nonce:     Nonce(),
		SourceEID: EIDAddress(changed.IID, changed.Prefix.Addr()),
		ITRRLOCs:  itrs,
		Records:   []lisp.RequestRecord{record},
	}
	return req.AppendBinary(nil)
}
