package lisp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
)

// AFI is an Address Family Identifier (IANA "Address Family Numbers"), the
// 16-bit tag in front of every address in a LISP control message.
type AFI uint16

// The AFIs this package decodes. Addresses of any other AFI cannot be
// skipped (their length is unknown) and are refused with ErrUnknownType.
const (
	AFINone              AFI = 0     // no address (RFC 9301 §5.2)
	AFIIPv4              AFI = 1     // 4 bytes
	AFIIPv6              AFI = 2     // 16 bytes
	AFIDistinguishedName AFI = 17    // NUL-terminated ASCII (draft-farinacci-lisp-name-encoding)
	AFILCAF              AFI = 16387 // LISP Canonical Address Format (RFC 8060)
	AFIMAC               AFI = 16389 // 48-bit MAC address
)

func (a AFI) String() string {
	switch a {
	case AFINone:
		return "none"
	case AFIIPv4:
		return "IPv4"
	case AFIIPv6:
		return "IPv6"
	case AFIDistinguishedName:
		return "DN"
	case AFILCAF:
		return "LCAF"
	case AFIMAC:
		return "MAC"
	}
	return "AFI(" + strconv.Itoa(int(a)) + ")"
}

// Address is a LISP address as carried in EID, RLOC and LCAF fields: an AFI
// and its value. It is a small value type, like netip.Addr; the zero
// Address is the empty address (AFI 0). Build one with IPAddress,
// MACAddress, NameAddress or LCAFAddress and compare with Equal.
type Address struct {
	afi AFI
	ip  netip.Addr
	// other holds the value of the AFIs that are not IP: a string for a
	// distinguished name, a [6]byte for a MAC, an LCAF. One field keeps
	// the Address at 48 bytes, which decoding many locators feels.
	other any
}

// IPAddress is an IPv4 or IPv6 address (AFI 1 or 2). An IPv4-mapped IPv6
// address stays IPv6; a zone is dropped, the wire has no place for it. The
// invalid netip.Addr gives the empty Address.
func IPAddress(ip netip.Addr) Address {
	switch {
	case ip.Is4():
		return Address{afi: AFIIPv4, ip: ip}
	case ip.Is6():
		return Address{afi: AFIIPv6, ip: ip.WithZone("")}
	}
	return Address{}
}

// MACAddress is a 48-bit MAC address (AFI 16389).
func MACAddress(mac [6]byte) Address { return Address{afi: AFIMAC, other: mac} }

// NameAddress is a distinguished name (AFI 17). Names cannot contain NUL.
func NameAddress(name string) Address { return Address{afi: AFIDistinguishedName, other: name} }

// LCAFAddress is an LCAF-encoded address (AFI 16387). nil gives the empty
// Address.
func LCAFAddress(l LCAF) Address {
	if l == nil || reflect.ValueOf(l).IsNil() {
		return Address{}
	}
	return Address{afi: AFILCAF, other: l}
}

// MustParseAddress is IPAddress(netip.MustParseAddr(s)), for tests and
// examples.
func MustParseAddress(s string) Address { return IPAddress(netip.MustParseAddr(s)) }

// AFI is the address family.
func (a Address) AFI() AFI { return a.afi }

// IP is the IPv4 or IPv6 address, or the invalid netip.Addr for other AFIs.
func (a Address) IP() netip.Addr {
	return a.ip
}

// MAC is the MAC address, or zero for other AFIs.
func (a Address) MAC() [6]byte {
	mac, _ := a.other.([6]byte)
	return mac
}

// Name is the distinguished name, or "" for other AFIs.
func (a Address) Name() string {
	name, _ := a.other.(string)
	return name
}

// LCAF is the LCAF value, or nil for other AFIs.
func (a Address) LCAF() LCAF {
	l, _ := a.other.(LCAF)
	return l
}

// IsZero reports whether a is the empty address (AFI 0).
func (a Address) IsZero() bool { return a.afi == AFINone }

// Equal reports whether a and b are the same address on the wire.
func (a Address) Equal(b Address) bool {
	if a.afi != b.afi {
		return false
	}
	switch a.afi {
	case AFIIPv4, AFIIPv6:
		return a.ip == b.ip
	case AFIMAC, AFIDistinguishedName:
		return a.other == b.other
	case AFILCAF:
		ea, errA := a.AppendBinary(nil)
		eb, errB := b.AppendBinary(nil)
		if errA != nil || errB != nil {
			return reflect.DeepEqual(a.other, b.other)
		}
		return bytes.Equal(ea, eb)
	}
	return true
}

func (a Address) String() string {
	switch a.afi {
	case AFINone:
		return "(none)"
	case AFIIPv4, AFIIPv6:
		return a.IP().String()
	case AFIMAC:
		mac := a.MAC()
		return net.HardwareAddr(mac[:]).String()
	case AFIDistinguishedName:
		return strconv.Quote(a.Name())
	case AFILCAF:
		return a.LCAF().String()
	}
	return a.afi.String()
}

// Len is the encoded length, AFI included.
func (a Address) Len() int { return addressLen(a, 0) }

// AppendBinary appends the AFI and the address.
func (a Address) AppendBinary(b []byte) ([]byte, error) { return appendAddress(b, a, 0) }

// DecodeAddress decodes one address from the front of b and returns it
// with the number of bytes it took.
func DecodeAddress(b []byte) (Address, int, error) {
	r := newReader(b, "address")
	var a Address
	r.address(&a)
	return a, r.off, r.error()
}

// maskBits is the length in bits of a prefix's address, for checking an
// EID mask-len, or -1 where a mask-len has no fixed bound (names, LCAFs
// other than Instance ID).
func maskBits(a Address) int {
	switch a.afi {
	case AFINone:
		return 0
	case AFIIPv4:
		return 32
	case AFIIPv6:
		return 128
	case AFIMAC:
		return 48
	case AFILCAF:
		if iid, ok := a.other.(*InstanceID); ok {
			return maskBits(iid.Address)
		}
	}
	return -1
}

func addressLen(a Address, depth int) int {
	switch a.afi {
	case AFIIPv4:
		return 2 + 4
	case AFIIPv6:
		return 2 + 16
	case AFIMAC:
		return 2 + 6
	case AFIDistinguishedName:
		return 2 + len(a.Name()) + 1
	case AFILCAF:
		if depth >= MaxLCAFDepth {
			return 0
		}
		return 2 + lcafHeaderLen + a.LCAF().bodyLen(depth+1)
	}
	return 2
}

func appendAddress(b []byte, a Address, depth int) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(a.afi))
	switch a.afi {
	case AFINone:
		return b, nil
	case AFIIPv4:
		v := a.ip.As4()
		return append(b, v[:]...), nil
	case AFIIPv6:
		v := a.ip.As16()
		return append(b, v[:]...), nil
	case AFIMAC:
		mac := a.MAC()
		return append(b, mac[:]...), nil
	case AFIDistinguishedName:
		name := a.Name()
		if strings.IndexByte(name, 0) >= 0 {
			return nil, encodeError("address", "distinguished name %q contains NUL", name)
		}
		b = append(b, name...)
		return append(b, 0), nil
	case AFILCAF:
		return appendLCAF(b, a.LCAF(), depth)
	}
	return nil, encodeError("address", "unknown AFI %d", a.afi)
}

// address decodes an AFI-encoded address into a. It writes the fields in
// place (returning the 48-byte value and copying it into the heap costs a
// bulk write barrier) and reads IP addresses without calls: a mapping's
// decoding time is mostly its addresses.
func (r *reader) address(a *Address) {
	if r.end-r.off < 2 {
		r.short("AFI")
		*a = Address{}
		return
	}
	afi := AFI(binary.BigEndian.Uint16(r.b[r.off:]))
	r.off += 2
	switch afi {
	case AFINone:
		a.afi, a.ip, a.other = afi, netip.Addr{}, nil
		return
	case AFIIPv4:
		if r.end-r.off >= 4 {
			a.afi, a.ip, a.other = afi, netip.AddrFrom4([4]byte(r.b[r.off:r.off+4])), nil
			r.off += 4
			return
		}
		r.short("IPv4 address")
	case AFIIPv6:
		if r.end-r.off >= 16 {
			a.afi, a.ip, a.other = afi, netip.AddrFrom16([16]byte(r.b[r.off:r.off+16])), nil
			r.off += 16
			return
		}
		r.short("IPv6 address")
	case AFIMAC:
		if v := r.take(6, "MAC address"); v != nil {
			a.afi, a.ip, a.other = afi, netip.Addr{}, [6]byte(v)
			return
		}
	case AFIDistinguishedName:
		n := bytes.IndexByte(r.b[r.off:r.end], 0)
		if n < 0 {
			r.fail("distinguished name", errShort) // no terminating NUL
			break
		}
		name := string(r.take(n, "distinguished name"))
		r.off++ // the NUL
		a.afi, a.ip, a.other = afi, netip.Addr{}, name
		return
	case AFILCAF:
		if l := r.lcaf(); l != nil {
			a.afi, a.ip, a.other = afi, netip.Addr{}, l
			return
		}
	default:
		r.failAt(r.off-2, "AFI", fmt.Errorf("%w: AFI %d", ErrUnknownType, afi))
	}
	*a = Address{}
}
