package maprequest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// Offsets in an Encapsulated Map-Request over IPv4: the ECM header (4
// bytes), the inner IPv4 (20) and UDP (8) headers, then the Map-Request,
// whose nonce follows its first word.
const (
	ecmUDPChecksum = 4 + 20 + 6
	ecmNonce       = 4 + 20 + 8 + 4
)

// Offsets in a Map-Reply: the nonce after the first word, and the locator
// count of the first record after the record's TTL.
const (
	replyNonce    = 4
	replyLocators = 12 + 4
)

// requests are Encapsulated Map-Requests with a zero nonce, all of one
// length, back to back: the generator copies one and writes the nonce of
// each send into it.
type requests struct {
	buf  []byte
	size int
}

func (r *requests) msg(i int) []byte { return r.buf[i*r.size : (i+1)*r.size] }

// newRequests builds n Map-Requests, as an ITR at source sends them, for
// EIDs drawn inside registered prefixes (every answer is a mapping, the
// map-resolver's usual work, not a negative reply).
func newRequests(n int, prefixes []netip.Prefix, source netip.AddrPort) (*requests, error) {
	r := rand.New(rand.NewPCG(seed, 2))
	var out requests
	for range n {
		p := prefixes[r.IntN(len(prefixes))]
		host := uint32(0)
		if p.Bits() < 32 {
			host = r.Uint32() >> p.Bits()
		}
		a := p.Addr().As4()
		binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(a[:])|host)
		ecm, err := lig.NewRequest(lisp.IPAddress(netip.AddrFrom4(a)), source, 0)
		if err != nil {
			return nil, fmt.Errorf("build Map-Request: %w", err)
		}
		start := len(out.buf)
		if out.buf, err = ecm.AppendBinary(out.buf); err != nil {
			return nil, fmt.Errorf("build Map-Request: %w", err)
		}
		switch size := len(out.buf) - start; {
		case out.size == 0:
			out.size = size
		case size != out.size:
			return nil, fmt.Errorf("build Map-Request: %d bytes, others have %d", size, out.size)
		}
	}
	return &out, nil
}

// putNonce writes nonce into a copy of a request whose nonce is zero, and
// updates its inner UDP checksum incrementally (RFC 1624), so that the
// request stays valid without summing it again.
func putNonce(b []byte, nonce uint64) {
	binary.BigEndian.PutUint64(b[ecmNonce:], nonce)
	old := binary.BigEndian.Uint16(b[ecmUDPChecksum:])
	if old == 0 { // no checksum
		return
	}
	// HC' = ~(~HC + ~m + m') for each changed word m, where m = 0.
	sum := uint32(^old)
	for i := 0; i < 8; i += 2 {
		sum += 0xffff + uint32(binary.BigEndian.Uint16(b[ecmNonce+i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff // zero means "no checksum" in UDP over IPv4
	}
	binary.BigEndian.PutUint16(b[ecmUDPChecksum:], c)
}

// readReply returns the nonce of a Map-Reply and whether its first record
// is negative (no locators).
func readReply(b []byte) (nonce uint64, negative, ok bool) {
	if len(b) < replyLocators+1 || lisp.MsgType(b[0]>>4) != lisp.TypeMapReply {
		return 0, false, false
	}
	return binary.BigEndian.Uint64(b[replyNonce:]), b[replyLocators] == 0, true
}
