package lisp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// MapReply answers a Map-Request with EID-records (RFC 9301 §5.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=2 |P|E|S|          Reserved               | Record Count  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Nonce . . .                           |
//	|                         . . . Nonce                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    EID-records (MapRecord) ...                |
//
// A record with no locators is a negative Map-Reply; its Action says what
// to do with the traffic.
type MapReply struct {
	Probe     bool // P: answers an RLOC-probe
	EchoNonce bool // E: the ETR can echo nonces
	Security  bool // S: LISP-SEC
	Nonce     uint64
	Records   []MapRecord
}

const (
	mrepProbe     = 1 << 27
	mrepEchoNonce = 1 << 26
	mrepSecurity  = 1 << 25
)

func (m *MapReply) Type() MsgType { return TypeMapReply }

func (m *MapReply) Len() int { return 12 + recordsLen(m.Records) }

func (m *MapReply) AppendBinary(b []byte) ([]byte, error) {
	b, err := m.AppendHeader(b, len(m.Records))
	if err != nil {
		return nil, err
	}
	return appendRecords(b, m.Records, "Map-Reply")
}

// AppendHeader appends the fixed part of m, the flags and nonce, saying
// that records records follow, and not m.Records: the caller appends the
// records (MapRecord.AppendBinary, or copies of records it encoded once).
func (m *MapReply) AppendHeader(b []byte, records int) ([]byte, error) {
	if records > 255 {
		return nil, countError("Map-Reply", "records", records, 255)
	}
	w := uint32(TypeMapReply)<<28 |
		flag(m.Probe, mrepProbe) |
		flag(m.EchoNonce, mrepEchoNonce) |
		flag(m.Security, mrepSecurity) |
		uint32(records)
	b = binary.BigEndian.AppendUint32(b, w)
	return binary.BigEndian.AppendUint64(b, m.Nonce), nil
}

func (m *MapReply) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Reply")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapReply) decode(r *reader) {
	w := r.header(TypeMapReply)
	m.Probe = w&mrepProbe != 0
	m.EchoNonce = w&mrepEchoNonce != 0
	m.Security = w&mrepSecurity != 0
	m.Nonce = r.u64("nonce")
	m.Records = r.records(m.Records, int(w&0xff))
}

func (m *MapReply) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Map-Reply nonce %#016x", m.Nonce)
	writeFlags(&s, []flagName{{m.Probe, "probe"}, {m.EchoNonce, "echo-nonce"}, {m.Security, "security"}})
	s.WriteString(recordsString(m.Records))
	return s.String()
}
