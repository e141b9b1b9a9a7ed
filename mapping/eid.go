// Package mapping is the EID-prefix database of the mapping system: EIDs
// as the map-server keys them, and a longest-prefix-match table of them
// per instance ID, for IPv4 and IPv6.
package mapping

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/amptcp/amptcp/lisp"
)

// EID is an EID-prefix: an IPv4 or IPv6 prefix in an instance ID (0 for
// none). The prefix is always masked.
type EID struct {
	IID    uint32
	Prefix netip.Prefix
}

// NewEID returns the EID of prefix p in instance iid, masked.
func NewEID(iid uint32, p netip.Prefix) EID { return EID{IID: iid, Prefix: p.Masked()} }

// HostEID is the EID of a single address.
func HostEID(iid uint32, a netip.Addr) EID {
	return EID{IID: iid, Prefix: netip.PrefixFrom(a, a.BitLen())}
}

func (e EID) String() string {
	if e.IID == 0 {
		return e.Prefix.String()
	}
	return "[" + strconv.FormatUint(uint64(e.IID), 10) + "]" + e.Prefix.String()
}

// Contains reports whether e covers o: same instance, o inside e.
func (e EID) Contains(o EID) bool {
	return e.IID == o.IID && e.Prefix.Bits() <= o.Prefix.Bits() && e.Prefix.Contains(o.Prefix.Addr())
}

// FromWire reads the EID of a record or Map-Request record: an IPv4 or
// IPv6 address, possibly in an Instance-ID LCAF, and its mask-length.
// Other EIDs (names, MACs, source/dest keys) are not kept in this database.
func FromWire(a lisp.Address, maskLen uint8) (EID, error) {
	var iid uint32
	if l, ok := a.LCAF().(*lisp.InstanceID); ok {
		iid, a = l.IID, l.Address
	}
	ip := a.IP()
	if !ip.IsValid() {
		return EID{}, fmt.Errorf("EID %s is not an IPv4 or IPv6 prefix", a)
	}
	p, err := ip.Prefix(int(maskLen))
	if err != nil {
		return EID{}, fmt.Errorf("EID %s/%d: %w", a, maskLen, err)
	}
	return EID{IID: iid, Prefix: p}, nil
}

// Wire returns the EID as a record carries it: the address (in an
// Instance-ID LCAF when IID is not 0) and the mask-length.
func (e EID) Wire() (lisp.Address, uint8) {
	a := lisp.IPAddress(e.Prefix.Addr())
	if e.IID != 0 {
		a = lisp.LCAFAddress(&lisp.InstanceID{IID: e.IID, Address: a})
	}
	return a, uint8(e.Prefix.Bits())
}
