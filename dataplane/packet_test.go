package dataplane

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/amptcp/amptcp/internal/inet"
	"github.com/amptcp/amptcp/lisp"
)

// Packets for the tables of the program tests, built independently of
// the C code: the LISP header by the lisp package's codec (the one the
// golden vectors check), IP, UDP and TCP here.

const (
	protoTCP = 6
	protoUDP = 17
	ethIPv4  = 0x0800
	ethIPv6  = 0x86dd
)

func eth(dst, src net.HardwareAddr, typ uint16, payload []byte) []byte {
	b := make([]byte, 14, 14+len(payload))
	copy(b, dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], typ)
	return append(b, payload...)
}

func ethType(a netip.Addr) uint16 {
	if a.Is4() {
		return ethIPv4
	}
	return ethIPv6
}

// udp is an IP packet with a UDP datagram.
func udp(src, dst netip.AddrPort, ttl uint8, payload []byte) []byte {
	n := inet.HeaderLen(src.Addr())
	b := make([]byte, n+len(payload))
	copy(b[n:], payload)
	if err := inet.PutUDP(b, src, dst, ttl, 0); err != nil {
		panic(err)
	}
	return b
}

// tcpSeg describes a TCP segment for tcp.
type tcpSeg struct {
	flags   uint8
	seq     uint32
	options []byte
	payload []byte
}

const (
	fin = 0x01
	syn = 0x02
	rst = 0x04
	ack = 0x10
)

// tcp is an IP packet with a TCP segment, checksums filled in.
func tcp(src, dst netip.AddrPort, ttl uint8, s tcpSeg) []byte {
	opts := append([]byte(nil), s.options...)
	for len(opts)%4 != 0 {
		opts = append(opts, 0) // end of options
	}
	hl := 20 + len(opts)
	seg := make([]byte, hl, hl+len(s.payload))
	binary.BigEndian.PutUint16(seg[0:], src.Port())
	binary.BigEndian.PutUint16(seg[2:], dst.Port())
	binary.BigEndian.PutUint32(seg[4:], s.seq)
	seg[12] = byte(hl/4) << 4
	seg[13] = s.flags
	binary.BigEndian.PutUint16(seg[14:], 65535)
	copy(seg[20:], opts)
	seg = append(seg, s.payload...)
	ip := ipHeader(src.Addr(), dst.Addr(), protoTCP, ttl, len(seg))
	binary.BigEndian.PutUint16(seg[16:], l4Checksum(src.Addr(), dst.Addr(), protoTCP, seg))
	return append(ip, seg...)
}

// ipHeader is an IPv4 (DF clear) or IPv6 header for a payload of n bytes.
func ipHeader(src, dst netip.Addr, proto, ttl uint8, n int) []byte {
	if src.Is4() {
		h := make([]byte, 20)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+n))
		h[8], h[9] = ttl, proto
		s, d := src.As4(), dst.As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		binary.BigEndian.PutUint16(h[10:], inet.Checksum(h))
		return h
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(n))
	h[6], h[7] = proto, ttl
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return h
}

// l4Checksum is the TCP or UDP checksum of seg (its checksum field
// zero) with the pseudo-header.
func l4Checksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	var pseudo []byte
	pseudo = append(pseudo, src.AsSlice()...)
	pseudo = append(pseudo, dst.AsSlice()...)
	pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(len(seg)))
	pseudo = append(pseudo, 0, 0, 0, proto)
	return inet.Checksum(append(pseudo, seg...))
}

// validL4 reports whether the TCP or UDP checksum of an IP packet holds.
func validL4(pkt []byte) bool {
	var src, dst netip.Addr
	var proto uint8
	var seg []byte
	if pkt[0]>>4 == 4 {
		src, dst = netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20]))
		proto, seg = pkt[9], pkt[int(pkt[0]&0xf)*4:]
	} else {
		src, dst = netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
		proto, seg = pkt[6], pkt[40:]
	}
	return l4Checksum(src, dst, proto, seg) == 0
}

func optMSS(mss uint16) []byte { return []byte{2, 4, byte(mss >> 8), byte(mss)} }

// mpCapableSYN is the MP_CAPABLE option of a SYN (MPTCP v1: no key).
func mpCapableSYN() []byte { return []byte{30, 4, 0x01, 0x81} }

// mpCapableACK is the MP_CAPABLE option of the third ACK: both keys.
func mpCapableACK(sender, receiver uint64) []byte {
	b := []byte{30, 20, 0x01, 0x81}
	b = binary.BigEndian.AppendUint64(b, sender)
	return binary.BigEndian.AppendUint64(b, receiver)
}

// mpJoinSYN is the MP_JOIN option of a SYN naming the receiver's token.
func mpJoinSYN(token uint32) []byte {
	b := []byte{30, 12, 0x10, 0x01}
	b = binary.BigEndian.AppendUint32(b, token)
	return binary.BigEndian.AppendUint32(b, 0x12345678) // sender's random number
}

// lispHeader encodes a data header with the lisp codec.
func lispHeader(h lisp.DataHeader) []byte {
	b, err := h.AppendBinary(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// encap wraps an inner IP packet as the ITR does: outer IP with DF (IPv4)
// and the inner TTL and TOS, UDP to 4341 with a zero checksum.
func encap(src, dst netip.Addr, sport uint16, ttl, tos uint8, hdr, inner []byte) []byte {
	payload := append(append([]byte(nil), hdr...), inner...)
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], 4341)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	u = append(u, payload...)
	ip := ipHeader(src, dst, protoUDP, ttl, len(u))
	if src.Is4() {
		ip[1] = tos
		ip[6] = 0x40 // DF
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], inet.Checksum(ip))
	} else {
		binary.BigEndian.PutUint32(ip, 6<<28|uint32(tos)<<20)
	}
	return append(ip, u...)
}

// mix32 and flowHash are bpf/paths.h's, for the UDP source port the ITR
// picks and the IPv6 flow label.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func flowHash(proto uint8, src, dst netip.AddrPort) uint32 {
	s, d := addrWords(src.Addr()), addrWords(dst.Addr())
	h := uint32(proto)
	for i := range 4 {
		h = mix32(h ^ s.A[i] ^ (d.A[i] * 0x9e3779b1))
	}
	sp, dp := be16(src.Port()), be16(dst.Port())
	return mix32(h ^ (uint32(sp)<<16 | uint32(dp)))
}

// be16 is a port as the programs hold it: network order in memory.
func be16(v uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))
}

func entropyPort(proto uint8, src, dst netip.AddrPort) uint16 {
	return 0xc000 | uint16(flowHash(proto, src, dst)&0x3fff)
}
