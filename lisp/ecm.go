package lisp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/amptcp/amptcp/internal/inet"
)

// ECM is an Encapsulated Control Message: a control message (in practice a
// Map-Request) with the IP and UDP headers of its original sender, sent by
// an ITR to a map-resolver and by a map-server to an ETR (RFC 9301 §5.8):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Type=8 |S|D|E|M|            Reserved                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       IPv4 or IPv6 Header                     |
//	|                  (uses RLOC or EID addresses)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       Source Port = xxxx      |       Dest Port = yyyy        |
//	|           UDP Length          |        UDP Checksum           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    LISP Control Message                       |
//
// The inner headers are written with their checksums and an IPv4 ID and
// flow label of zero; decoding does not check the inner checksums (the
// outer UDP checksum covers them) and skips IPv4 options. An ECM inside an
// ECM is refused. The LISP-SEC authentication data that RFC 9303 puts
// before the inner header when S is set is not supported: like OOR,
// lispers.net and Wireshark, the decoder expects the inner header at once.
type ECM struct {
	Security bool // S: LISP-SEC
	DDT      bool // D: sent by a DDT node
	ToETR    bool // E: a map-server forwarding to the ETR
	ToMS     bool // M: a map-resolver forwarding to the map-server
	// Source and Destination are the inner IP addresses and UDP ports:
	// where the encapsulated message came from and was sent to.
	Source, Destination netip.AddrPort
	TTL                 uint8 // inner IPv4 TTL or IPv6 hop limit
	TOS                 uint8 // inner IPv4 TOS or IPv6 traffic class
	Message             Message
}

const (
	ecmSecurity = 1 << 27
	ecmDDT      = 1 << 26
	ecmToETR    = 1 << 25
	ecmToMS     = 1 << 24
	protoUDP    = 17
)

func (m *ECM) Type() MsgType { return TypeECM }

func (m *ECM) Len() int {
	n := 4 + inet.HeaderLen(m.Source.Addr())
	if m.Message != nil {
		n += m.Message.Len()
	}
	return n
}

func (m *ECM) AppendBinary(b []byte) ([]byte, error) {
	switch {
	case m.Message == nil:
		return nil, encodeError("ECM", "no message to encapsulate")
	case m.Message.Type() == TypeECM:
		return nil, encodeError("ECM", "an ECM cannot encapsulate an ECM")
	}
	w := uint32(TypeECM)<<28 |
		flag(m.Security, ecmSecurity) |
		flag(m.DDT, ecmDDT) |
		flag(m.ToETR, ecmToETR) |
		flag(m.ToMS, ecmToMS)
	b = binary.BigEndian.AppendUint32(b, w)
	start := len(b)
	b = append(b, make([]byte, inet.HeaderLen(m.Source.Addr()))...)
	b, err := m.Message.AppendBinary(b)
	if err != nil {
		return nil, err
	}
	if err := inet.PutUDP(b[start:], m.Source, m.Destination, m.TTL, m.TOS); err != nil {
		return nil, encodeError("ECM", "inner header: %v", err)
	}
	return b, nil
}

func (m *ECM) DecodeFromBytes(b []byte) error {
	r := newReader(b, "ECM")
	m.decode(&r)
	r.finish()
	return r.error()
}

func (m *ECM) decode(r *reader) {
	w := r.header(TypeECM)
	m.Security = w&ecmSecurity != 0
	m.DDT = w&ecmDDT != 0
	m.ToETR = w&ecmToETR != 0
	m.ToMS = w&ecmToMS != 0
	udpLen := r.innerIP(m)
	if r.err != nil {
		return
	}
	sport := r.u16("inner UDP source port")
	dport := r.u16("inner UDP destination port")
	if r.u16("inner UDP length") != uint16(udpLen) && r.err == nil {
		r.failAt(r.off-2, "inner UDP length", ErrBadLength)
	}
	r.u16("inner UDP checksum")
	m.Source = netip.AddrPortFrom(m.Source.Addr(), sport)
	m.Destination = netip.AddrPortFrom(m.Destination.Addr(), dport)
	if r.err != nil {
		return
	}
	if r.remaining() < 1 {
		r.fail("message type", errShort)
		return
	}
	inner := MsgType(r.b[r.off] >> 4)
	if inner == TypeECM {
		r.fail("message type", fmt.Errorf("%w: ECM inside an ECM", ErrBadValue))
		return
	}
	if prev, ok := m.Message.(*MapRequest); ok && inner == TypeMapRequest {
		// Decoding into the same ECM again reuses its Map-Request, as the
		// map-resolver's loop does.
		r.msg = "Map-Request"
		prev.decode(r)
		r.finish()
	} else {
		m.Message = r.message()
	}
	r.msg = "ECM"
	if r.err != nil {
		r.err.Msg = "ECM"
		r.prefix("%s.", inner)
	}
}

// innerIP decodes the inner IPv4 or IPv6 header, which must hold an
// unfragmented UDP datagram filling the rest of the ECM, and returns the
// UDP length it implies.
func (r *reader) innerIP(m *ECM) int {
	if r.err != nil {
		return 0
	}
	if r.remaining() < 1 {
		r.fail("inner IP version", errShort)
		return 0
	}
	start := r.off
	switch version := r.b[r.off] >> 4; version {
	case 4:
		vihl := r.u8("inner IPv4 version")
		m.TOS = r.u8("inner IPv4 TOS")
		total := int(r.u16("inner IPv4 total length"))
		r.u16("inner IPv4 ID")
		frag := r.u16("inner IPv4 fragment")
		m.TTL = r.u8("inner IPv4 TTL")
		proto := r.u8("inner IPv4 protocol")
		r.u16("inner IPv4 checksum")
		src := r.take(4, "inner IPv4 source")
		dst := r.take(4, "inner IPv4 destination")
		ihl := int(vihl&0xf) * 4
		switch {
		case r.err != nil:
		case ihl < inet.IPv4HeaderLen:
			r.failAt(start, "inner IPv4 header length", ErrBadValue)
		case frag&0x3fff != 0:
			r.failAt(start+6, "inner IPv4 fragment", fmt.Errorf("%w: fragmented", ErrBadValue))
		case proto != protoUDP:
			r.failAt(start+9, "inner IPv4 protocol", fmt.Errorf("%w: protocol %d, want UDP", ErrBadValue, proto))
		case total != r.end-start:
			r.failAt(start+2, "inner IPv4 total length", ErrBadLength)
		default:
			r.take(ihl-inet.IPv4HeaderLen, "inner IPv4 options")
			m.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(src)), 0)
			m.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(dst)), 0)
			return total - ihl
		}
	case 6:
		w := r.u32("inner IPv6 version")
		m.TOS = uint8(w >> 20)
		payload := int(r.u16("inner IPv6 payload length"))
		next := r.u8("inner IPv6 next header")
		m.TTL = r.u8("inner IPv6 hop limit")
		src := r.take(16, "inner IPv6 source")
		dst := r.take(16, "inner IPv6 destination")
		switch {
		case r.err != nil:
		case next != protoUDP:
			r.failAt(start+6, "inner IPv6 next header", fmt.Errorf("%w: next header %d, want UDP", ErrBadValue, next))
		case payload != r.remaining():
			r.failAt(start+4, "inner IPv6 payload length", ErrBadLength)
		default:
			m.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(src)), 0)
			m.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(dst)), 0)
			return payload
		}
	default:
		r.fail("inner IP version", fmt.Errorf("%w: version %d", ErrBadValue, version))
	}
	return 0
}

func (m *ECM) String() string {
	var s strings.Builder
	s.WriteString("ECM")
	writeFlags(&s, []flagName{{m.Security, "security"}, {m.DDT, "ddt"}, {m.ToETR, "to-etr"}, {m.ToMS, "to-ms"}})
	fmt.Fprintf(&s, " inner %s -> %s ttl %d", m.Source, m.Destination, m.TTL)
	if m.Message != nil {
		s.WriteString("\n")
		s.WriteString(m.Message.String())
	}
	return s.String()
}
