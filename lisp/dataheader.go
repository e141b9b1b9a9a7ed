package lisp

import (
	"encoding/binary"
	"fmt"
	"io"
)

// DataHeaderLen is the length of the LISP data header.
const DataHeaderLen = 8

// DataHeader is the header between the outer UDP header (port 4341) and the
// inner packet of an encapsulated data packet (RFC 9300 §5.3; the K bits
// are RFC 8061's key ID; the P bit is RFC 9305's, LISP-GPE):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|N|L|E|V|I|P|K|K|            Nonce/Map-Version                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Instance ID/Locator-Status-Bits               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// With V the first word carries a 12-bit source and a 12-bit destination
// map-version instead of the nonce; with I the second word is a 24-bit
// instance ID and 8 LSBs. N and V exclude each other. With P (LISP-GPE)
// the first word's low byte is the Next Protocol, the payload's type, and
// the 16 bits before it the nonce (N) or the map-version (V), zero with
// neither:
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|N|L|E|V|I|P|K|K|  Nonce/Map-Version (16 bits)  | Next Protocol |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The same layout as VXLAN-GPE's, whose GRO in the Linux kernel therefore
// aggregates LISP-GPE packets (docs/routers.md). Fields whose flag is
// clear are ignored on decode and sent as zero. Encoding and decoding
// allocate nothing.
type DataHeader struct {
	NoncePresent      bool  // N
	LSBsEnabled       bool  // L
	EchoNonceRequest  bool  // E: meaningful only with N
	MapVersionPresent bool  // V
	IIDPresent        bool  // I
	GPE               bool  // P: a LISP-GPE header, with NextProtocol (RFC 9305)
	KeyID             uint8 // KK: 0 unencrypted, 1-3 the key (RFC 8061)

	Nonce            uint32       // 24 bits, or 16 with P
	SourceMapVersion uint16       // 12 bits, without P
	DestMapVersion   uint16       // 12 bits, without P
	GPEMapVersion    uint16       // with P and V: the 16-bit map-version
	NextProtocol     NextProtocol // with P
	InstanceID       uint32       // 24 bits
	LSBs             uint32       // 32 bits, or 8 with I
}

// NextProtocol is what a LISP-GPE packet carries (IANA's LISP-GPE Next
// Protocol registry, RFC 9305 §8).
type NextProtocol uint8

const (
	NextIPv4     NextProtocol = 1
	NextIPv6     NextProtocol = 2
	NextEthernet NextProtocol = 3
	NextNSH      NextProtocol = 4
)

func (p NextProtocol) String() string {
	switch p {
	case NextIPv4:
		return "ipv4"
	case NextIPv6:
		return "ipv6"
	case NextEthernet:
		return "ethernet"
	case NextNSH:
		return "nsh"
	}
	return fmt.Sprintf("next-protocol %d", uint8(p))
}

const (
	dataN = 0x80
	dataL = 0x40
	dataE = 0x20
	dataV = 0x10
	dataI = 0x08
	dataP = 0x04
	dataK = 0x03
)

// Len is DataHeaderLen.
func (h *DataHeader) Len() int { return DataHeaderLen }

// DecodeFromBytes decodes the header at the front of a packet; the bytes
// after the first DataHeaderLen are the inner packet and are not read.
func (h *DataHeader) DecodeFromBytes(b []byte) error {
	if len(b) < DataHeaderLen {
		return &ParseError{Msg: "data header", Field: "header", Offset: len(b), Err: io.ErrShortBuffer}
	}
	w0 := binary.BigEndian.Uint32(b)
	w1 := binary.BigEndian.Uint32(b[4:])
	flags := uint8(w0 >> 24)
	if flags&(dataN|dataV) == dataN|dataV {
		return &ParseError{Msg: "data header", Field: "N and V bits", Err: fmt.Errorf("%w: both set", ErrBadValue)}
	}
	*h = DataHeader{
		NoncePresent:      flags&dataN != 0,
		LSBsEnabled:       flags&dataL != 0,
		EchoNonceRequest:  flags&(dataN|dataE) == dataN|dataE,
		MapVersionPresent: flags&dataV != 0,
		IIDPresent:        flags&dataI != 0,
		GPE:               flags&dataP != 0,
		KeyID:             flags & dataK,
	}
	switch {
	case h.GPE:
		h.NextProtocol = NextProtocol(w0)
		if h.NoncePresent {
			h.Nonce = w0 >> 8 & 0xffff
		} else if h.MapVersionPresent {
			h.GPEMapVersion = uint16(w0 >> 8)
		}
	case h.NoncePresent:
		h.Nonce = w0 & 0xffffff
	case h.MapVersionPresent:
		h.SourceMapVersion = uint16(w0>>12) & MaxMapVersion
		h.DestMapVersion = uint16(w0) & MaxMapVersion
	}
	if h.IIDPresent {
		h.InstanceID = w1 >> 8
		h.LSBs = w1 & 0xff
	} else {
		h.LSBs = w1
	}
	return nil
}

// AppendBinary appends the 8-byte header.
func (h *DataHeader) AppendBinary(b []byte) ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	flags := uint32(h.KeyID)
	var w0, w1 uint32
	if h.NoncePresent {
		flags |= dataN
		w0 = h.Nonce
		if h.EchoNonceRequest {
			flags |= dataE
		}
	}
	if h.MapVersionPresent {
		flags |= dataV
		w0 = uint32(h.SourceMapVersion)<<12 | uint32(h.DestMapVersion)
	}
	if h.LSBsEnabled {
		flags |= dataL
	}
	if h.GPE {
		flags |= dataP
		w0 = (w0|uint32(h.GPEMapVersion))<<8 | uint32(h.NextProtocol)
	}
	w1 = h.LSBs
	if h.IIDPresent {
		flags |= dataI
		w1 = h.InstanceID<<8 | h.LSBs
	}
	b = binary.BigEndian.AppendUint32(b, flags<<24|w0)
	return binary.BigEndian.AppendUint32(b, w1), nil
}

// PathID is amptcp's path identifier ([LISP-TE] §III.B.1): with the L
// bit clear the Locator-Status-Bits are not in use (RFC 9300 §5.3), and
// amptcp's ITRs write into their low 8 bits the number of the ELP a packet
// follows, its index in the Map-Reply plus one, for the RTRs on its way
// (docs/routers.md). 0 is none.
func (h *DataHeader) PathID() uint8 {
	if h.LSBsEnabled {
		return 0
	}
	return uint8(h.LSBs)
}

// SetPathID writes id as PathID reads it, clearing the L bit.
func (h *DataHeader) SetPathID(id uint8) {
	h.LSBsEnabled = false
	h.LSBs = h.LSBs&^0xff | uint32(id)
}

// check refuses fields that do not fit; its errors are constants so that
// encoding allocates nothing.
func (h *DataHeader) check() error {
	switch {
	case h.NoncePresent && h.MapVersionPresent:
		return errDataNV
	case h.EchoNonceRequest && !h.NoncePresent:
		return errDataEcho
	case h.Nonce > 0xffffff:
		return errDataNonce
	case h.GPE && h.Nonce > 0xffff:
		return errDataGPENonce
	case h.GPE && (h.SourceMapVersion != 0 || h.DestMapVersion != 0):
		return errDataGPEVersions
	case h.GPEMapVersion != 0 && !(h.GPE && h.MapVersionPresent):
		return errDataGPEVersion
	case h.NextProtocol != 0 && !h.GPE:
		return errDataNext
	case h.SourceMapVersion > MaxMapVersion || h.DestMapVersion > MaxMapVersion:
		return errDataVersion
	case h.InstanceID > 0xffffff:
		return errDataIID
	case h.IIDPresent && h.LSBs > 0xff:
		return errDataLSBs
	case h.KeyID > 3:
		return errDataKey
	}
	return nil
}

var (
	errDataNV      = encodeError("data header", "N and V bits both set")
	errDataEcho    = encodeError("data header", "echo-nonce request without a nonce")
	errDataNonce   = encodeError("data header", "nonce exceeds 24 bits")
	errDataVersion = encodeError("data header", "map-version exceeds 12 bits")
	errDataIID     = encodeError("data header", "instance ID exceeds 24 bits")
	errDataLSBs    = encodeError("data header", "LSBs exceed the 8 bits left by an instance ID")
	errDataKey     = encodeError("data header", "key ID exceeds 2 bits")

	errDataGPENonce    = encodeError("data header", "nonce exceeds the 16 bits a LISP-GPE header leaves")
	errDataGPEVersions = encodeError("data header", "12-bit map-versions in a LISP-GPE header (its map-version is GPEMapVersion)")
	errDataGPEVersion  = encodeError("data header", "GPEMapVersion without the P and V bits")
	errDataNext        = encodeError("data header", "next protocol without the P bit")
)

func (h *DataHeader) String() string {
	s := "data"
	if h.NoncePresent {
		s += fmt.Sprintf(" nonce %#06x", h.Nonce)
		if h.EchoNonceRequest {
			s += " echo"
		}
	}
	switch {
	case h.MapVersionPresent && h.GPE:
		s += fmt.Sprintf(" map-version %d", h.GPEMapVersion)
	case h.MapVersionPresent:
		s += fmt.Sprintf(" map-version %d/%d", h.SourceMapVersion, h.DestMapVersion)
	}
	if h.GPE {
		s += " gpe " + h.NextProtocol.String()
	}
	if h.IIDPresent {
		s += fmt.Sprintf(" iid %d", h.InstanceID)
	}
	if h.LSBsEnabled {
		s += fmt.Sprintf(" lsbs %#x", h.LSBs)
	} else if id := h.PathID(); id != 0 {
		s += fmt.Sprintf(" path %d", id)
	}
	if h.KeyID != 0 {
		s += fmt.Sprintf(" key %d", h.KeyID)
	}
	return s
}
