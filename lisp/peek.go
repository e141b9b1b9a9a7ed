package lisp

import (
	"encoding/binary"
	"net/netip"
)

// PeekRequestEID reads, from an Encapsulated Control Message that a map-resolver
// would answer (neither the DDT nor the to-ETR bit), the EID of the first
// record of the Map-Request it carries, in its usual forms (an IPv4 or
// IPv6 address, possibly in an Instance-ID LCAF), without decoding the
// rest. It is a hint, for reading the mapping ahead (lispd looks up a
// batch's EIDs together, so that their cache misses overlap): the message
// may still be malformed, and what it cannot read it reports as not ok.
func PeekRequestEID(b []byte) (iid uint32, eid netip.Addr, ok bool) {
	const flags = ecmDDT | ecmToETR
	if len(b) < 4 || MsgType(b[0]>>4) != TypeECM || binary.BigEndian.Uint32(b)&flags != 0 {
		return 0, netip.Addr{}, false
	}
	off := 4
	switch {
	case len(b) > off && b[off]>>4 == 4:
		off += int(b[off]&0xf) * 4
	case len(b) > off+6 && b[off]>>4 == 6 && b[off+6] == protoUDP:
		off += 40
	default:
		return 0, netip.Addr{}, false
	}
	off += 8 // the UDP header
	if len(b) < off+12 || MsgType(b[off]>>4) != TypeMapRequest || b[off+3] == 0 {
		return 0, netip.Addr{}, false
	}
	addresses := 1 + int(b[off+2]&0x1f) + 1 // the source EID and the ITR-RLOCs
	off += 12                               // the header and the nonce
	for range addresses {
		if off = skipAddress(b, off); off < 0 {
			return 0, netip.Addr{}, false
		}
	}
	return peekEID(b, off+2) // after the record's reserved byte and mask-len
}

// PeekRegisterPrefix reads, from a Map-Register, the EID-prefix of its
// first record in the usual forms (an IPv4 or IPv6 prefix, possibly in an
// Instance-ID LCAF), without decoding the rest or checking the
// authentication: as PeekRequestEID, a hint for reading ahead what
// registering it will read.
func PeekRegisterPrefix(b []byte) (iid uint32, prefix netip.Prefix, ok bool) {
	if len(b) < authDataOffset || MsgType(b[0]>>4) != TypeMapRegister || b[3] == 0 {
		return 0, netip.Prefix{}, false
	}
	off := authDataOffset + int(binary.BigEndian.Uint16(b[14:]))
	if len(b) < off+recordFixedLen {
		return 0, netip.Prefix{}, false
	}
	maskLen := int(b[off+5])
	iid, eid, ok := peekEID(b, off+recordFixedLen)
	if !ok {
		return 0, netip.Prefix{}, false
	}
	prefix, err := eid.Prefix(maskLen)
	return iid, prefix, err == nil
}

// peekEID reads the EID at off: an IPv4 or IPv6 address, possibly in an
// Instance-ID LCAF.
func peekEID(b []byte, off int) (iid uint32, eid netip.Addr, ok bool) {
	if len(b) < off+2 {
		return 0, netip.Addr{}, false
	}
	afi := AFI(binary.BigEndian.Uint16(b[off:]))
	off += 2
	if afi == AFILCAF { // an Instance-ID LCAF around an address
		if len(b) < off+12 || LCAFType(b[off+2]) != LCAFInstanceID {
			return 0, netip.Addr{}, false
		}
		iid = binary.BigEndian.Uint32(b[off+6:])
		afi = AFI(binary.BigEndian.Uint16(b[off+10:]))
		off += 12
	}
	switch {
	case afi == AFIIPv4 && len(b) >= off+4:
		return iid, netip.AddrFrom4([4]byte(b[off:])), true
	case afi == AFIIPv6 && len(b) >= off+16:
		return iid, netip.AddrFrom16([16]byte(b[off:])), true
	}
	return 0, netip.Addr{}, false
}

// skipAddress returns the offset after the address at off, or -1 for one
// it does not skip.
func skipAddress(b []byte, off int) int {
	if len(b) < off+2 {
		return -1
	}
	switch AFI(binary.BigEndian.Uint16(b[off:])) {
	case AFINone:
		return off + 2
	case AFIIPv4:
		return off + 6
	case AFIIPv6:
		return off + 18
	case AFILCAF:
		if len(b) < off+8 {
			return -1
		}
		return off + 8 + int(binary.BigEndian.Uint16(b[off+6:]))
	}
	return -1
}
