package mptcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The reasons a decoder refuses its input; a *ParseError wraps one of them.
var (
	// ErrTruncated: the input ends inside an attribute or a structure.
	ErrTruncated = io.ErrUnexpectedEOF
	// ErrBadLength: an attribute's length does not fit its type.
	ErrBadLength = errors.New("attribute length does not fit its type")
	// ErrBadValue: a field holds a value the format does not allow.
	ErrBadValue = errors.New("value out of range")
)

// ParseError says which message this package could not decode, and where.
type ParseError struct {
	Msg    string // what was being decoded, e.g. "event sub_established"
	Field  string // the attribute or field, e.g. "sport"
	Offset int    // byte offset of the field in the attributes
	Err    error  // ErrTruncated, ErrBadLength or ErrBadValue
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("mptcp: %s: %s at offset %d: %v", e.Msg, e.Field, e.Offset, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// nlaHeaderLen is the size of a netlink attribute header (struct nlattr).
const nlaHeaderLen = 4

// nlaTypeMask clears the NLA_F_NESTED and NLA_F_NET_BYTEORDER bits.
const nlaTypeMask = 0x3fff

// walkAttrs calls fn for each netlink attribute in b, in order, with its
// type (flags cleared), its payload and the payload's offset in b. It stops
// at the first malformed header, reported as a *ParseError for msg.
func walkAttrs(msg string, b []byte, fn func(typ uint16, data []byte, off int) error) error {
	for off := 0; off < len(b); {
		if len(b)-off < nlaHeaderLen {
			return &ParseError{Msg: msg, Field: "attribute header", Offset: off, Err: ErrTruncated}
		}
		n := int(binary.NativeEndian.Uint16(b[off:]))
		typ := binary.NativeEndian.Uint16(b[off+2:]) & nlaTypeMask
		if n < nlaHeaderLen {
			return &ParseError{Msg: msg, Field: fmt.Sprintf("attribute %d", typ), Offset: off, Err: ErrBadLength}
		}
		if n > len(b)-off {
			return &ParseError{Msg: msg, Field: fmt.Sprintf("attribute %d", typ), Offset: off, Err: ErrTruncated}
		}
		if err := fn(typ, b[off+nlaHeaderLen:off+n], off+nlaHeaderLen); err != nil {
			return err
		}
		off += (n + 3) &^ 3 // NLA_ALIGN; the last attribute may lack its padding
	}
	return nil
}

// fixed reads an attribute whose payload must have spec's size.
func fixed(msg string, data []byte, off int, spec attrSpec) ([]byte, error) {
	if len(data) == spec.size || spec.atLeast && len(data) > spec.size {
		return data[:spec.size], nil
	}
	return nil, &ParseError{Msg: msg, Field: spec.name, Offset: off, Err: ErrBadLength}
}

// addrFrom turns 4 or 16 bytes into an address, unmapping ::ffff:a.b.c.d:
// a socket bound to [::] reports IPv4 peers that way.
func addrFrom(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap()
}

// familyOf is the AF_* value of an address: AF_INET for IPv4 (also when
// written as ::ffff:a.b.c.d), AF_INET6 otherwise.
func familyOf(a netip.Addr) uint16 {
	if a.Unmap().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}
