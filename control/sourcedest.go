package control

import (
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// SourceDestAddress is the EID of a source-specific record: a Source-Dest
// LCAF (RFC 8060 type 12) of the two prefixes, inside an Instance-ID LCAF
// when iid is not 0.
func SourceDestAddress(iid uint32, src, dst netip.Prefix) (lisp.Address, uint8) {
	a := lisp.LCAFAddress(&lisp.SourceDest{
		SourceMaskLen: uint8(src.Bits()), DestMaskLen: uint8(dst.Bits()),
		Source: lisp.IPAddress(src.Addr()), Dest: lisp.IPAddress(dst.Addr()),
	})
	if iid != 0 {
		a = lisp.LCAFAddress(&lisp.InstanceID{IID: iid, Address: a})
	}
	return a, 0
}

// SourceDestOf reads a source-specific record's EID: the instance, the
// source prefix and the destination prefix. It says false for any other
// EID.
func SourceDestOf(a lisp.Address) (iid uint32, src, dst netip.Prefix, ok bool) {
	if l, isIID := a.LCAF().(*lisp.InstanceID); isIID {
		iid, a = l.IID, l.Address
	}
	sd, isSD := a.LCAF().(*lisp.SourceDest)
	if !isSD {
		return 0, netip.Prefix{}, netip.Prefix{}, false
	}
	s, d := sd.Source.IP(), sd.Dest.IP()
	if !s.IsValid() || !d.IsValid() {
		return 0, netip.Prefix{}, netip.Prefix{}, false
	}
	var err1, err2 error
	src, err1 = s.Unmap().Prefix(int(sd.SourceMaskLen))
	dst, err2 = d.Unmap().Prefix(int(sd.DestMaskLen))
	return iid, src, dst, err1 == nil && err2 == nil
}
