package lisp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// MapRequest asks for the mapping of EID-prefixes, probes an RLOC, or
// solicits a Map-Request (SMR) (RFC 9301 §5.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=1 |A|M|P|S|p|s|R|I|  Rsvd   |L|D|   IRC   | Record Count  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Nonce . . .                           |
//	|                         . . . Nonce                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Source-EID-AFI        |   Source EID Address  ...     |
//	|         ITR-RLOC-AFI 1        |    ITR-RLOC Address 1  ...    |
//	|                              ...                              |
//	|         ITR-RLOC-AFI n        |    ITR-RLOC Address n  ...    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Reserved    | EID mask-len  |        EID-Prefix-AFI         | \ Rec
//	|                       EID-Prefix  ...                         | /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Map-Reply Record  ...   (M bit)             |
//	|                   xTR-ID, site-ID         (I bit)             |
//
// IRC is the number of ITR-RLOCs minus one. The M and I bits are not
// fields: they are set when MapReply and XTRID are. The xTR-ID and site-ID
// follow RFC 9437; a 16-byte xTR-ID without site-ID, as lispers.net sends
// it, is accepted too.
type MapRequest struct {
	Authoritative bool // A: sent by an authoritative source
	Probe         bool // P: an RLOC-probe
	SMR           bool // S: solicit a Map-Request
	PITR          bool // p: sent by a proxy ITR
	SMRInvoked    bool // s: sent because of an SMR
	LocalXTR      bool // L: from an xTR of the same site
	DontMapReply  bool // D: no Map-Reply wanted (SMR procedure)
	Nonce         uint64
	SourceEID     Address
	ITRRLOCs      []Address // 1 to MaxITRRLOCs
	Records       []RequestRecord
	MapReply      *MapRecord // the sender's own mapping (M bit), or nil
	XTRID         *XTRID     // the sender's xTR-ID (I bit, RFC 9437), or nil
}

// RequestRecord is an EID-prefix a Map-Request asks about.
type RequestRecord struct {
	EID     Address
	MaskLen uint8
}

// XTRID identifies an xTR and its site in messages with the I bit set.
type XTRID struct {
	ID     [16]byte
	SiteID uint64
}

// MaxITRRLOCs is the most ITR-RLOCs a Map-Request can carry (5-bit IRC).
const MaxITRRLOCs = 32

const (
	mreqAuthoritative = 1 << 27
	mreqMapData       = 1 << 26
	mreqProbe         = 1 << 25
	mreqSMR           = 1 << 24
	mreqPITR          = 1 << 23
	mreqSMRInvoked    = 1 << 22
	mreqXTRID         = 1 << 20
	mreqLocalXTR      = 1 << 14
	mreqDontMapReply  = 1 << 13
	xtrIDLen          = 16 + 8
)

func (m *MapRequest) Type() MsgType { return TypeMapRequest }

func (m *MapRequest) Len() int {
	n := 12 + addressLen(m.SourceEID, 0)
	for _, a := range m.ITRRLOCs {
		n += addressLen(a, 0)
	}
	for _, rec := range m.Records {
		n += 2 + addressLen(rec.EID, 0)
	}
	if m.MapReply != nil {
		n += m.MapReply.Len()
	}
	if m.XTRID != nil {
		n += xtrIDLen
	}
	return n
}

func (m *MapRequest) AppendBinary(b []byte) ([]byte, error) {
	const name = "Map-Request"
	switch {
	case len(m.ITRRLOCs) < 1 || len(m.ITRRLOCs) > MaxITRRLOCs:
		return nil, encodeError(name, "%d ITR-RLOCs, want 1 to %d", len(m.ITRRLOCs), MaxITRRLOCs)
	case len(m.Records) > 255:
		return nil, countError(name, "records", len(m.Records), 255)
	}
	w := uint32(TypeMapRequest)<<28 |
		flag(m.Authoritative, mreqAuthoritative) |
		flag(m.MapReply != nil, mreqMapData) |
		flag(m.Probe, mreqProbe) |
		flag(m.SMR, mreqSMR) |
		flag(m.PITR, mreqPITR) |
		flag(m.SMRInvoked, mreqSMRInvoked) |
		flag(m.XTRID != nil, mreqXTRID) |
		flag(m.LocalXTR, mreqLocalXTR) |
		flag(m.DontMapReply, mreqDontMapReply) |
		uint32(len(m.ITRRLOCs)-1)<<8 |
		uint32(len(m.Records))
	b = binary.BigEndian.AppendUint32(b, w)
	b = binary.BigEndian.AppendUint64(b, m.Nonce)
	b, err := appendAddress(b, m.SourceEID, 0)
	if err != nil {
		return nil, err
	}
	for _, a := range m.ITRRLOCs {
		if b, err = appendAddress(b, a, 0); err != nil {
			return nil, err
		}
	}
	for _, rec := range m.Records {
		if err := checkMaskLen(rec.EID, rec.MaskLen); err != nil {
			return nil, encodeError(name, "EID %s: %v", rec.EID, err)
		}
		b = append(b, 0, rec.MaskLen)
		if b, err = appendAddress(b, rec.EID, 0); err != nil {
			return nil, err
		}
	}
	if m.MapReply != nil {
		if b, err = m.MapReply.appendTo(b, name); err != nil {
			return nil, err
		}
	}
	return appendXTRID(b, m.XTRID), nil
}

// mapRequestBlock holds a Map-Request with room for the usual one
// ITR-RLOC and one record: Parse allocates it at once.
type mapRequestBlock struct {
	m    MapRequest
	itrs [1]Address
	recs [1]RequestRecord
}

func newMapRequest() *MapRequest {
	b := new(mapRequestBlock)
	b.m.ITRRLOCs, b.m.Records = b.itrs[:0], b.recs[:0]
	return &b.m
}

func (m *MapRequest) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Request")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapRequest) decode(r *reader) {
	w := r.header(TypeMapRequest)
	m.Authoritative = w&mreqAuthoritative != 0
	m.Probe = w&mreqProbe != 0
	m.SMR = w&mreqSMR != 0
	m.PITR = w&mreqPITR != 0
	m.SMRInvoked = w&mreqSMRInvoked != 0
	m.LocalXTR = w&mreqLocalXTR != 0
	m.DontMapReply = w&mreqDontMapReply != 0
	itrCount := int(w>>8&0x1f) + 1
	recCount := int(w & 0xff)
	m.Nonce = r.u64("nonce")
	r.address(&m.SourceEID)
	if r.err != nil {
		r.prefix("source EID.")
		return
	}
	m.ITRRLOCs = m.ITRRLOCs[:0]
	for i := range itrCount {
		m.ITRRLOCs = grow(m.ITRRLOCs)
		r.address(&m.ITRRLOCs[i])
		if r.err != nil {
			r.prefix("ITR-RLOCs[%d].", i)
			return
		}
	}
	m.Records = m.Records[:0]
	if c := r.capacity(recCount, 4); cap(m.Records) < c {
		m.Records = make([]RequestRecord, 0, c)
	}
	for i := range recCount {
		r.u8("reserved")
		rec := RequestRecord{MaskLen: r.u8("EID mask-len")}
		maskAt := r.off - 1
		r.address(&rec.EID)
		if r.err == nil && checkMaskLen(rec.EID, rec.MaskLen) != nil {
			r.failAt(maskAt, "EID mask-len", ErrBadValue)
		}
		if r.err != nil {
			r.prefix("records[%d].", i)
			return
		}
		m.Records = append(m.Records, rec)
	}
	if w&mreqMapData == 0 {
		m.MapReply = nil
	} else {
		if m.MapReply == nil {
			m.MapReply = new(MapRecord)
		}
		r.record(m.MapReply)
		if r.err != nil {
			r.prefix("Map-Reply record.")
			return
		}
	}
	m.XTRID = nil
	if w&mreqXTRID != 0 {
		// lispers.net sends the xTR-ID without the site-ID of RFC 9437.
		if r.err == nil && r.remaining() == 16 {
			m.XTRID = &XTRID{ID: [16]byte(r.take(16, "xTR-ID"))}
			return
		}
		m.XTRID = r.xtrID(true)
	}
}

func appendXTRID(b []byte, id *XTRID) []byte {
	if id == nil {
		return b
	}
	b = append(b, id.ID[:]...)
	return binary.BigEndian.AppendUint64(b, id.SiteID)
}

// xtrID decodes the xTR-ID and site-ID that end a message with the I bit.
func (r *reader) xtrID(present bool) *XTRID {
	if !present || r.err != nil {
		return nil
	}
	id := &XTRID{}
	if v := r.take(16, "xTR-ID"); v != nil {
		id.ID = [16]byte(v)
	}
	id.SiteID = r.u64("site-ID")
	return id
}

func (m *MapRequest) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Map-Request nonce %#016x", m.Nonce)
	writeFlags(&s, []flagName{
		{m.Authoritative, "authoritative"}, {m.Probe, "probe"}, {m.SMR, "smr"},
		{m.PITR, "pitr"}, {m.SMRInvoked, "smr-invoked"}, {m.LocalXTR, "local-xtr"},
		{m.DontMapReply, "dont-map-reply"},
	})
	fmt.Fprintf(&s, " source-eid %s itr-rlocs [%s]", m.SourceEID, joinAddresses(m.ITRRLOCs, " "))
	for _, rec := range m.Records {
		fmt.Fprintf(&s, "\n  eid %s/%d", rec.EID, rec.MaskLen)
	}
	if m.MapReply != nil {
		s.WriteString("\n  map-reply record ")
		s.WriteString(m.MapReply.String())
	}
	writeXTRID(&s, m.XTRID)
	return s.String()
}

type flagName struct {
	set  bool
	name string
}

// writeFlags writes " flags [a b]" for the set flags, nothing if none is.
func writeFlags(s *strings.Builder, flags []flagName) {
	var set []string
	for _, f := range flags {
		if f.set {
			set = append(set, f.name)
		}
	}
	if len(set) > 0 {
		fmt.Fprintf(s, " flags [%s]", strings.Join(set, " "))
	}
}

func writeXTRID(s *strings.Builder, id *XTRID) {
	if id != nil {
		fmt.Fprintf(s, "\n  xtr-id %x site-id %d", id.ID, id.SiteID)
	}
}
