// Package inet writes IPv4/IPv6 + UDP headers, with their checksums, in
// front of a payload: what an encapsulated control message carries inside
// and what a test capture needs around a datagram.
package inet

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
	protoUDP      = 17
)

// HeaderLen is the length of the IP and UDP headers for packets from src.
func HeaderLen(src netip.Addr) int {
	if src.Is4() {
		return IPv4HeaderLen + UDPHeaderLen
	}
	return IPv6HeaderLen + UDPHeaderLen
}

// PutUDP fills pkt[:HeaderLen(src)] with the IP and UDP headers of a
// datagram from src to dst whose payload is the rest of pkt. ttl is the
// IPv4 TTL or IPv6 hop limit, tos the IPv4 TOS or IPv6 traffic class.
func PutUDP(pkt []byte, src, dst netip.AddrPort, ttl, tos uint8) error {
	s, d := src.Addr(), dst.Addr()
	if !s.IsValid() || !d.IsValid() {
		return errors.New("inet: source or destination address missing")
	}
	if s.Is4() != d.Is4() {
		return errors.New("inet: source and destination must both be IPv4 or both IPv6")
	}
	n := HeaderLen(s)
	if len(pkt) < n || len(pkt)-n+UDPHeaderLen > 0xffff {
		return errors.New("inet: packet too short for its headers or payload too long for UDP")
	}
	udpLen := len(pkt) - n + UDPHeaderLen
	var ip, udp []byte
	if s.Is4() {
		ip, udp = pkt[:IPv4HeaderLen], pkt[IPv4HeaderLen:]
		ip[0] = 4<<4 | 5
		ip[1] = tos
		binary.BigEndian.PutUint16(ip[2:], uint16(IPv4HeaderLen+udpLen))
		clear(ip[4:8]) // ID, flags, fragment offset
		ip[8], ip[9] = ttl, protoUDP
		clear(ip[10:12])
		a4, b4 := s.As4(), d.As4()
		copy(ip[12:], a4[:])
		copy(ip[16:], b4[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip, 0)))
	} else {
		ip, udp = pkt[:IPv6HeaderLen], pkt[IPv6HeaderLen:]
		binary.BigEndian.PutUint32(ip, 6<<28|uint32(tos)<<20)
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6], ip[7] = protoUDP, ttl
		a16, b16 := s.As16(), d.As16()
		copy(ip[8:], a16[:])
		copy(ip[24:], b16[:])
	}
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	clear(udp[6:8])
	// The pseudo-header: addresses, protocol and UDP length.
	var c uint32
	if s.Is4() {
		c = sum(ip[12:20], 0)
	} else {
		c = sum(ip[8:40], 0)
	}
	c = sum(udp, c+protoUDP+uint32(udpLen))
	ck := ^fold(c)
	if ck == 0 {
		ck = 0xffff // zero means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(udp[6:], ck)
	return nil
}

// Checksum is the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 { return ^fold(sum(b, 0)) }

func sum(b []byte, acc uint32) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}
