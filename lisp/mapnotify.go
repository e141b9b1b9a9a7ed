package lisp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// MapNotify acknowledges a Map-Register that asked for it, or tells the
// xTRs of a site that its mapping changed (RFC 9301 §5.7):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=4 |I|R|          Reserved                 | Record Count  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Nonce . . .                           |
//	|                         . . . Nonce                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Key ID     | Algorithm ID  |  Authentication Data Length   |
//	~                     Authentication Data                       ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    EID-records (MapRecord) ...                |
//	|                    xTR-ID and site-ID (I bit)                 |
//
// A Map-Notify that acknowledges a Map-Register carries its nonce and its
// records.
type MapNotify struct {
	Nonce   uint64
	Auth    Auth
	Records []MapRecord
	XTRID   *XTRID // the I bit
}

// MapNotifyAck is a Map-Notify's acknowledgement, sent by an xTR to the
// map-server for an unsolicited Map-Notify (RFC 9301 §5.7). It has the
// Map-Notify's format with Type 5.
type MapNotifyAck struct {
	MapNotify
}

const (
	mnotXTRID  = 1 << 27
	mnotForRTR = 1 << 26 // NAT traversal; refused
)

func (m *MapNotify) Type() MsgType    { return TypeMapNotify }
func (m *MapNotifyAck) Type() MsgType { return TypeMapNotifyAck }

func (m *MapNotify) Len() int {
	n := 12 + m.Auth.len() + recordsLen(m.Records)
	if m.XTRID != nil {
		n += xtrIDLen
	}
	return n
}

func (m *MapNotify) AppendBinary(b []byte) ([]byte, error) {
	return m.appendAs(b, TypeMapNotify)
}

func (m *MapNotifyAck) AppendBinary(b []byte) ([]byte, error) {
	return m.appendAs(b, TypeMapNotifyAck)
}

// AppendSigned appends m authenticated with key by m.Auth.Algorithm and
// m.Auth.KeyID, and sets m.Auth.Data to what it sent.
func (m *MapNotify) AppendSigned(b, key []byte) ([]byte, error) {
	return appendSigned(b, m, &m.Auth, key)
}

// AppendSigned appends m authenticated with key by m.Auth.Algorithm and
// m.Auth.KeyID, and sets m.Auth.Data to what it sent.
func (m *MapNotifyAck) AppendSigned(b, key []byte) ([]byte, error) {
	return appendSigned(b, m, &m.Auth, key)
}

func (m *MapNotify) appendAs(b []byte, t MsgType) ([]byte, error) {
	if len(m.Records) > 255 {
		return nil, countError(t.String(), "records", len(m.Records), 255)
	}
	w := uint32(t)<<28 | flag(m.XTRID != nil, mnotXTRID) | uint32(len(m.Records))
	b = binary.BigEndian.AppendUint32(b, w)
	b = binary.BigEndian.AppendUint64(b, m.Nonce)
	b, err := m.Auth.appendTo(b, t.String())
	if err != nil {
		return nil, err
	}
	if b, err = appendRecords(b, m.Records, t.String()); err != nil {
		return nil, err
	}
	return appendXTRID(b, m.XTRID), nil
}

// AppendNotifyFor appends the Map-Notify that acknowledges reg, the bytes
// of a Map-Register: its nonce, Key ID, algorithm, records and xTR-ID,
// the records copied as they came rather than decoded and encoded again
// (RFC 9301 §5.7 has the Map-Notify carry the Map-Register's records;
// lispers.net copies them too), with authLen bytes of authentication
// data, zeroed, for Sign or an Authenticator to fill in: the full digest
// even where the ETR sent one truncated, 0 for an unauthenticated one.
// reg must be a Map-Register that DecodeFromBytes took: only its type and
// its authentication section's bounds are checked here.
func AppendNotifyFor(b, reg []byte, authLen int) ([]byte, error) {
	if len(reg) < authDataOffset || MsgType(reg[0]>>4) != TypeMapRegister {
		return nil, encodeError("Map-Notify", "acknowledges %d bytes that are no Map-Register", len(reg))
	}
	n := int(binary.BigEndian.Uint16(reg[14:16]))
	if len(reg) < authDataOffset+n {
		return nil, encodeError("Map-Notify", "Map-Register of %d bytes is shorter than its %d bytes of authentication data", len(reg), n)
	}
	if authLen < 0 || authLen > len(zeroAuth) {
		return nil, encodeError("Map-Notify", "%d bytes of authentication data: no algorithm has them", authLen)
	}
	w := uint32(TypeMapNotify)<<28 | uint32(reg[3])
	if binary.BigEndian.Uint32(reg)&mregXTRID != 0 {
		w |= mnotXTRID
	}
	b = binary.BigEndian.AppendUint32(b, w)
	b = append(b, reg[4:authDataOffset-2]...) // nonce, Key ID, algorithm
	b = binary.BigEndian.AppendUint16(b, uint16(authLen))
	b = append(b, zeroAuth[:authLen]...)
	return append(b, reg[authDataOffset+n:]...), nil
}

func (m *MapNotify) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Notify")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapNotifyAck) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Notify-Ack")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapNotify) decode(r *reader)    { m.decodeAs(r, TypeMapNotify) }
func (m *MapNotifyAck) decode(r *reader) { m.decodeAs(r, TypeMapNotifyAck) }

func (m *MapNotify) decodeAs(r *reader, t MsgType) {
	w := r.header(t)
	if w&mnotForRTR != 0 {
		// NAT traversal appends an MS-RTR authentication block whose
		// layout differs between implementations.
		r.failAt(r.off-4, "R bit", fmt.Errorf("%w: Map-Notify for an RTR (NAT traversal)", ErrUnknownType))
		return
	}
	m.Nonce = r.u64("nonce")
	r.auth(&m.Auth)
	m.Records = r.records(m.Records, int(w&0xff))
	m.XTRID = r.xtrID(w&mnotXTRID != 0)
}

func (m *MapNotify) String() string    { return m.stringAs(TypeMapNotify) }
func (m *MapNotifyAck) String() string { return m.stringAs(TypeMapNotifyAck) }

func (m *MapNotify) stringAs(t MsgType) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s nonce %#016x", t, m.Nonce)
	writeAuth(&s, m.Auth)
	s.WriteString(recordsString(m.Records))
	writeXTRID(&s, m.XTRID)
	return s.String()
}
