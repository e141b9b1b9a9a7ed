package lisp

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// LCAFType is the Type field of an LCAF header (IANA "LISP Canonical
// Address Format (LCAF) Types").
type LCAFType uint8

// LCAF types. Those with a Go type below are interpreted; the others
// decode into *RawLCAF.
const (
	LCAFNull            LCAFType = 0
	LCAFAFIList         LCAFType = 1  // *AFIList
	LCAFInstanceID      LCAFType = 2  // *InstanceID
	LCAFASNumber        LCAFType = 3  // *ASNumber
	LCAFAppData         LCAFType = 4  // *AppData
	LCAFGeoCoordinates  LCAFType = 5  // raw
	LCAFOpaqueKey       LCAFType = 6  // raw
	LCAFNATTraversal    LCAFType = 7  // *NATTraversal
	LCAFNonceLocator    LCAFType = 8  // raw
	LCAFMulticastInfo   LCAFType = 9  // raw
	LCAFELP             LCAFType = 10 // *ELP
	LCAFSecurityKey     LCAFType = 11 // raw
	LCAFSourceDest      LCAFType = 12 // *SourceDest
	LCAFReplicationList LCAFType = 13 // *ReplicationList
	LCAFJSON            LCAFType = 14 // *JSON
	LCAFKeyValue        LCAFType = 15 // *KeyValue
	LCAFEncapFormat     LCAFType = 16 // raw
	LCAFVendor          LCAFType = 255
)

var lcafTypeNames = [...]string{
	LCAFNull:            "Null",
	LCAFAFIList:         "AFI-List",
	LCAFInstanceID:      "Instance-ID",
	LCAFASNumber:        "AS-Number",
	LCAFAppData:         "App-Data",
	LCAFGeoCoordinates:  "Geo",
	LCAFOpaqueKey:       "Opaque-Key",
	LCAFNATTraversal:    "NAT-Traversal",
	LCAFNonceLocator:    "Nonce-Locator",
	LCAFMulticastInfo:   "Multicast-Info",
	LCAFELP:             "ELP",
	LCAFSecurityKey:     "Security-Key",
	LCAFSourceDest:      "Source-Dest",
	LCAFReplicationList: "RLE",
	LCAFJSON:            "JSON",
	LCAFKeyValue:        "Key-Value",
	LCAFEncapFormat:     "Encap-Format",
}

func (t LCAFType) String() string {
	if int(t) < len(lcafTypeNames) {
		return lcafTypeNames[t]
	}
	if t == LCAFVendor {
		return "Vendor"
	}
	return "LCAF(" + strconv.Itoa(int(t)) + ")"
}

// MaxLCAFDepth bounds LCAF nesting, on decode and on encode. Deployed
// software nests two deep (an ELP inside an AFI List, a Source/Dest key
// inside an Instance ID); deeper input is refused with ErrTooDeep.
const MaxLCAFDepth = 4

// lcafHeaderLen is the LCAF header after the AFI: Rsvd1, Flags, Type,
// Rsvd2 and Length.
const lcafHeaderLen = 6

// LCAF is the value of an LCAF-encoded address (RFC 8060):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           AFI = 16387         |     Rsvd1     |     Flags     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Type       |     Rsvd2     |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Length counts the bytes after the Length field. The concrete types are
// the pointer types named next to the LCAFType constants.
type LCAF interface {
	Type() LCAFType
	String() string
	// headerBits are the Rsvd1, Flags and Rsvd2 bytes of the header, which
	// a few types use for their own fields.
	headerBits() (rsvd1, flags, rsvd2 uint8)
	bodyLen(depth int) int
	appendBody(b []byte, depth int) ([]byte, error)
}

// appendLCAF appends the header after the AFI and the body of l, which
// sits at nesting depth depth (0 for an address not inside an LCAF).
func appendLCAF(b []byte, l LCAF, depth int) ([]byte, error) {
	if depth >= MaxLCAFDepth {
		return nil, encodeError("LCAF "+l.Type().String(), "nested deeper than %d", MaxLCAFDepth)
	}
	rsvd1, flags, rsvd2 := l.headerBits()
	b = append(b, rsvd1, flags, byte(l.Type()), rsvd2, 0, 0)
	lengthAt := len(b) - 2
	b, err := l.appendBody(b, depth+1)
	if err != nil {
		return nil, err
	}
	n := len(b) - lengthAt - 2
	if n > 0xffff {
		return nil, encodeError("LCAF "+l.Type().String(), "body of %d bytes exceeds the 16-bit Length", n)
	}
	binary.BigEndian.PutUint16(b[lengthAt:], uint16(n))
	return b, nil
}

// lcaf decodes an LCAF after its AFI.
func (r *reader) lcaf() LCAF {
	start := r.off - 2
	h := r.take(lcafHeaderLen, "LCAF header")
	if h == nil {
		return nil
	}
	rsvd1, flags, typ, rsvd2 := h[0], h[1], LCAFType(h[2]), h[3]
	length := int(binary.BigEndian.Uint16(h[4:]))
	lengthAt := r.off - 2
	if r.depth >= MaxLCAFDepth {
		r.failAt(start, "LCAF "+typ.String(), ErrTooDeep)
		return nil
	}
	outer := r.limit(length, "LCAF length")
	if r.err != nil {
		return nil
	}
	r.depth++
	l := r.lcafBody(typ, rsvd1, flags, rsvd2)
	r.depth--
	r.unlimit(outer, lengthAt, "LCAF length")
	if r.err != nil {
		r.prefix("%s.", typ)
		return nil
	}
	return l
}

func (r *reader) lcafBody(typ LCAFType, rsvd1, flags, rsvd2 uint8) LCAF {
	switch typ {
	case LCAFAFIList:
		return r.afiList()
	case LCAFInstanceID:
		return r.instanceID(rsvd2)
	case LCAFASNumber:
		return r.asNumber()
	case LCAFAppData:
		return r.appData()
	case LCAFNATTraversal:
		return r.natTraversal()
	case LCAFELP:
		return r.elp()
	case LCAFSourceDest:
		return r.sourceDest()
	case LCAFReplicationList:
		return r.replicationList()
	case LCAFJSON:
		return r.json(rsvd2)
	case LCAFKeyValue:
		return r.keyValue()
	}
	return &RawLCAF{
		LCAFType: typ, Rsvd1: rsvd1, Flags: flags, Rsvd2: rsvd2,
		Body: r.copyBytes(r.remaining(), "body"),
	}
}

// RawLCAF is an LCAF of a type this package does not interpret, kept whole
// so that decoding and encoding again loses nothing.
type RawLCAF struct {
	LCAFType            LCAFType
	Rsvd1, Flags, Rsvd2 uint8
	Body                []byte
}

func (l *RawLCAF) Type() LCAFType                    { return l.LCAFType }
func (l *RawLCAF) headerBits() (uint8, uint8, uint8) { return l.Rsvd1, l.Flags, l.Rsvd2 }
func (l *RawLCAF) bodyLen(int) int                   { return len(l.Body) }
func (l *RawLCAF) appendBody(b []byte, _ int) ([]byte, error) {
	return append(b, l.Body...), nil
}
func (l *RawLCAF) String() string {
	return fmt.Sprintf("lcaf{%s, %d bytes}", l.LCAFType, len(l.Body))
}
