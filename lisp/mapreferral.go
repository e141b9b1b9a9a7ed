package lisp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// MapReferral is a DDT node's answer to a Map-Request: where in the DDT
// tree to ask next, or that the EID is not registered (RFC 8111):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=6 |                Reserved               | Record Count  |
//	|                         Nonce . . .                           |
//	|                         . . . Nonce                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Record TTL                           |
//	| Referral Count| EID mask-len  | ACT |A|I|     Reserved        |
//	|SigCnt |   Map Version Number  |            EID-AFI            |
//	|                          EID-prefix ...                       |
//	|    Priority   |    Weight     |  M Priority   |   M Weight    | \
//	|        Unused Flags         |R|         Loc/LCAF-AFI          |  Ref
//	|                             Locator ...                       | /
//	|                   Signature section (SigCnt times)            |
type MapReferral struct {
	Nonce   uint64
	Records []ReferralRecord
}

// ReferralAction is the ACT of a referral record (RFC 8111).
type ReferralAction uint8

// The referral actions.
const (
	ReferralNode             ReferralAction = 0 // ask one of these DDT nodes
	ReferralMS               ReferralAction = 1 // ask one of these map-servers
	ReferralMSAck            ReferralAction = 2 // the map-server has the EID
	ReferralMSNotRegistered  ReferralAction = 3
	ReferralDelegationHole   ReferralAction = 4
	ReferralNotAuthoritative ReferralAction = 5
)

var referralActionNames = [...]string{
	ReferralNode:             "node-referral",
	ReferralMS:               "ms-referral",
	ReferralMSAck:            "ms-ack",
	ReferralMSNotRegistered:  "ms-not-registered",
	ReferralDelegationHole:   "delegation-hole",
	ReferralNotAuthoritative: "not-authoritative",
}

func (a ReferralAction) String() string {
	if int(a) < len(referralActionNames) {
		return referralActionNames[a]
	}
	return "referral-action(" + strconv.Itoa(int(a)) + ")"
}

// ReferralRecord is one EID-prefix of a Map-Referral and where to go for
// it. Referrals use the locator format; only their R bit is defined.
type ReferralRecord struct {
	TTL           uint32 // minutes
	EID           Address
	MaskLen       uint8
	Action        ReferralAction
	Authoritative bool // A
	Incomplete    bool // I: the referral set is not complete
	MapVersion    uint16
	Referrals     []Locator
	Signatures    []Signature // at most MaxSignatures
}

// Signature signs a referral record (RFC 8111):
//
//	|                   Original Record TTL                         |
//	|                   Signature Expiration                        |
//	|                   Signature Inception                         |
//	|            Key Tag            |           Sig Length          |
//	| Sig-Algorithm |    Reserved   |            Reserved           |
//	~                             Signature                         ~
type Signature struct {
	OriginalTTL uint32
	Expiration  uint32 // seconds since the Unix epoch
	Inception   uint32
	KeyTag      uint16
	Algorithm   uint8
	Data        []byte
}

// MaxSignatures is the most signatures a referral record can carry
// (4-bit SigCnt).
const MaxSignatures = maxSigCount

const signatureFixedLen = 20

func (m *MapReferral) Type() MsgType { return TypeMapReferral }

func (m *MapReferral) Len() int {
	n := 12
	for i := range m.Records {
		rec := &m.Records[i]
		n += recordFixedLen + addressLen(rec.EID, 0)
		for _, l := range rec.Referrals {
			n += l.len()
		}
		for _, sig := range rec.Signatures {
			n += signatureFixedLen + len(sig.Data)
		}
	}
	return n
}

func (m *MapReferral) AppendBinary(b []byte) ([]byte, error) {
	const name = "Map-Referral"
	if len(m.Records) > 255 {
		return nil, countError(name, "records", len(m.Records), 255)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(TypeMapReferral)<<28|uint32(len(m.Records)))
	b = binary.BigEndian.AppendUint64(b, m.Nonce)
	for i := range m.Records {
		var err error
		if b, err = m.Records[i].appendTo(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (rec *ReferralRecord) appendTo(b []byte) ([]byte, error) {
	const name = "Map-Referral"
	b, err := appendRecordHeader(b, recordHeader{
		ttl: rec.TTL, count: len(rec.Referrals), maskLen: rec.MaskLen,
		action: uint8(rec.Action), authoritative: rec.Authoritative, incomplete: rec.Incomplete,
		sigCount: len(rec.Signatures), mapVersion: rec.MapVersion,
	}, rec.EID, name, "referrals")
	if err != nil {
		return nil, err
	}
	for _, l := range rec.Referrals {
		if b, err = l.appendTo(b); err != nil {
			return nil, err
		}
	}
	for _, sig := range rec.Signatures {
		if len(sig.Data) > 0xffff {
			return nil, encodeError(name, "signature of %d bytes exceeds the 16-bit length", len(sig.Data))
		}
		b = binary.BigEndian.AppendUint32(b, sig.OriginalTTL)
		b = binary.BigEndian.AppendUint32(b, sig.Expiration)
		b = binary.BigEndian.AppendUint32(b, sig.Inception)
		b = binary.BigEndian.AppendUint16(b, sig.KeyTag)
		b = binary.BigEndian.AppendUint16(b, uint16(len(sig.Data)))
		b = append(b, sig.Algorithm, 0, 0, 0)
		b = append(b, sig.Data...)
	}
	return b, nil
}

func (m *MapReferral) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Referral")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapReferral) decode(r *reader) {
	w := r.header(TypeMapReferral)
	m.Nonce = r.u64("nonce")
	n := int(w & 0xff)
	m.Records = m.Records[:0]
	if c := r.capacity(n, minRecordLen); cap(m.Records) < c {
		m.Records = make([]ReferralRecord, 0, c)
	}
	for i := range n {
		m.Records = grow(m.Records)
		r.referralRecord(&m.Records[i])
		if r.err != nil {
			r.prefix("records[%d].", i)
			return
		}
	}
}

func (r *reader) referralRecord(rec *ReferralRecord) {
	h := r.recordHeader(&rec.EID)
	if r.err != nil {
		return
	}
	rec.TTL, rec.MaskLen, rec.MapVersion = h.ttl, h.maskLen, h.mapVersion
	rec.Action, rec.Authoritative, rec.Incomplete = ReferralAction(h.action), h.authoritative, h.incomplete
	rec.Referrals = r.locators(rec.Referrals, h.count, "referrals")
	if r.err != nil {
		return
	}
	rec.Signatures = rec.Signatures[:0]
	for i := range h.sigCount {
		sig := Signature{
			OriginalTTL: r.u32("original record TTL"),
			Expiration:  r.u32("signature expiration"),
			Inception:   r.u32("signature inception"),
			KeyTag:      r.u16("key tag"),
		}
		n := int(r.u16("signature length"))
		sig.Algorithm = r.u8("signature algorithm")
		r.take(3, "reserved")
		sig.Data = r.copyBytes(n, "signature")
		if r.err != nil {
			r.prefix("signatures[%d].", i)
			return
		}
		rec.Signatures = append(rec.Signatures, sig)
	}
}

func (m *MapReferral) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Map-Referral nonce %#016x", m.Nonce)
	for _, rec := range m.Records {
		fmt.Fprintf(&s, "\n  record %s/%d ttl %d action %s", rec.EID, rec.MaskLen, rec.TTL, rec.Action)
		writeFlags(&s, []flagName{{rec.Authoritative, "authoritative"}, {rec.Incomplete, "incomplete"}})
		for _, l := range rec.Referrals {
			s.WriteString("\n    referral ")
			s.WriteString(l.String())
		}
		for _, sig := range rec.Signatures {
			fmt.Fprintf(&s, "\n    signature key-tag %d algorithm %d %d bytes", sig.KeyTag, sig.Algorithm, len(sig.Data))
		}
	}
	return s.String()
}
