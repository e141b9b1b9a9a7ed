package lisp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// MapRegister registers an ETR's EID-prefixes and locators with a
// map-server (RFC 9301 §5.6):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=3 |P|S|I|        Reserved         |E|T|a|m|M| Record Count  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Nonce . . .                           |
//	|                         . . . Nonce                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Key ID     | Algorithm ID  |  Authentication Data Length   |
//	~                     Authentication Data                       ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    EID-records (MapRecord) ...                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    xTR-ID (128 bits, I bit)                   |
//	|                    site-ID (64 bits, I bit)                   |
//
// The m (mobile node) bit is that of draft-ietf-lisp-mn, where RFC 9301
// has a reserved bit. Send it with AppendSigned and check a received one
// with Verify on the bytes as they arrived.
type MapRegister struct {
	ProxyReply    bool // P: the map-server answers Map-Requests for us
	Security      bool // S: LISP-SEC capable
	EIDNotify     bool // E: an EID-notify from a first-hop router
	UseTTL        bool // T: time the registration out by the record TTL
	MergeRequest  bool // a: merge the RLOC sets of several xTRs
	MobileNode    bool // m: the xTR is a LISP mobile node
	WantMapNotify bool // M: acknowledge with a Map-Notify
	Nonce         uint64
	Auth          Auth
	Records       []MapRecord
	XTRID         *XTRID // the I bit
}

const (
	mregProxyReply    = 1 << 27
	mregSecurity      = 1 << 26
	mregXTRID         = 1 << 25
	mregEIDNotify     = 1 << 12
	mregUseTTL        = 1 << 11
	mregMergeRequest  = 1 << 10
	mregMobileNode    = 1 << 9
	mregWantMapNotify = 1 << 8
)

func (m *MapRegister) Type() MsgType { return TypeMapRegister }

func (m *MapRegister) Len() int {
	n := 12 + m.Auth.len() + recordsLen(m.Records)
	if m.XTRID != nil {
		n += xtrIDLen
	}
	return n
}

func (m *MapRegister) AppendBinary(b []byte) ([]byte, error) {
	const name = "Map-Register"
	if len(m.Records) > 255 {
		return nil, countError(name, "records", len(m.Records), 255)
	}
	w := uint32(TypeMapRegister)<<28 |
		flag(m.ProxyReply, mregProxyReply) |
		flag(m.Security, mregSecurity) |
		flag(m.XTRID != nil, mregXTRID) |
		flag(m.EIDNotify, mregEIDNotify) |
		flag(m.UseTTL, mregUseTTL) |
		flag(m.MergeRequest, mregMergeRequest) |
		flag(m.MobileNode, mregMobileNode) |
		flag(m.WantMapNotify, mregWantMapNotify) |
		uint32(len(m.Records))
	b = binary.BigEndian.AppendUint32(b, w)
	b = binary.BigEndian.AppendUint64(b, m.Nonce)
	b, err := m.Auth.appendTo(b, name)
	if err != nil {
		return nil, err
	}
	if b, err = appendRecords(b, m.Records, name); err != nil {
		return nil, err
	}
	return appendXTRID(b, m.XTRID), nil
}

// AppendSigned appends m authenticated with key by m.Auth.Algorithm and
// m.Auth.KeyID, and sets m.Auth.Data to what it sent.
func (m *MapRegister) AppendSigned(b, key []byte) ([]byte, error) {
	return appendSigned(b, m, &m.Auth, key)
}

func (m *MapRegister) DecodeFromBytes(b []byte) error {
	r := newReader(b, "Map-Register")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *MapRegister) decode(r *reader) {
	w := r.header(TypeMapRegister)
	m.ProxyReply = w&mregProxyReply != 0
	m.Security = w&mregSecurity != 0
	m.EIDNotify = w&mregEIDNotify != 0
	m.UseTTL = w&mregUseTTL != 0
	m.MergeRequest = w&mregMergeRequest != 0
	m.MobileNode = w&mregMobileNode != 0
	m.WantMapNotify = w&mregWantMapNotify != 0
	m.Nonce = r.u64("nonce")
	r.auth(&m.Auth)
	m.Records = r.records(m.Records, int(w&0xff))
	m.XTRID = r.xtrID(w&mregXTRID != 0)
}

func (m *MapRegister) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Map-Register nonce %#016x", m.Nonce)
	writeFlags(&s, []flagName{
		{m.ProxyReply, "proxy-reply"}, {m.Security, "security"}, {m.EIDNotify, "eid-notify"},
		{m.UseTTL, "use-ttl"}, {m.MergeRequest, "merge"}, {m.MobileNode, "mobile-node"},
		{m.WantMapNotify, "want-map-notify"},
	})
	writeAuth(&s, m.Auth)
	s.WriteString(recordsString(m.Records))
	writeXTRID(&s, m.XTRID)
	return s.String()
}

func writeAuth(s *strings.Builder, a Auth) {
	fmt.Fprintf(s, " key-id %d %s auth %x", a.KeyID, a.Algorithm, a.Data)
}
