package maprequest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// The site the bench registers into. Its key is no secret: lispd listens
// on loopback only, for the length of the run.
const (
	siteKey = "amptcp bench key"
	siteA   = "10.0.0.0/8"
	siteB   = "100.64.0.0/10"
)

// seed makes every run register the same prefixes and ask for the same
// EIDs, so that runs compare.
const seed = 0x616d70746370 // "amptcp"

// newPrefixes draws n distinct IPv4 prefixes of lengths /16 to /32, three
// quarters inside 10.0.0.0/8 and the rest inside 100.64.0.0/10, as
// mapping's BenchmarkTable1M does. Some nest inside others, as
// more-specific registrations do.
func newPrefixes(n int) []netip.Prefix {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := make(map[uint64]struct{}, n)
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		a := [4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
		if r.IntN(4) == 0 {
			a = [4]byte{100, 64 | byte(r.IntN(64)), byte(r.IntN(256)), byte(r.IntN(256))}
		}
		p, _ := netip.AddrFrom4(a).Prefix(16 + r.IntN(17))
		a = p.Addr().As4()
		k := uint64(binary.BigEndian.Uint32(a[:]))<<8 | uint64(p.Bits())
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, p)
	}
	return out
}

// registers holds the signed Map-Registers of the prefixes, back to back
// in one buffer: a million small allocations would cost the generator
// more than it costs lispd to receive them.
type registers struct {
	buf []byte
	off []int // message i is buf[off[i]:off[i+1]]
}

func (r *registers) len() int         { return len(r.off) - 1 }
func (r *registers) msg(i int) []byte { return r.buf[r.off[i]:r.off[i+1]] }

// rloc is the locator registered for prefix i: addresses of 198.18.0.0/15,
// the range for benchmarks (RFC 2544), so that the records differ.
func rloc(i int) lisp.Address {
	return lisp.IPAddress(netip.AddrFrom4([4]byte{198, 18 | byte(i>>16)&1, byte(i >> 8), byte(i)}))
}

// newRegisters builds one Map-Register per prefix, as an ETR registering
// its site sends it: one record with one RLOC, proxy-reply and
// want-map-notify set, HMAC-SHA-256 with the site's key, and nonce i+1,
// by which the Map-Notify is matched.
func newRegisters(prefixes []netip.Prefix) (*registers, error) {
	r := &registers{off: make([]int, 1, len(prefixes)+1)}
	key := []byte(siteKey)
	for i, p := range prefixes {
		m := lisp.MapRegister{
			ProxyReply: true, WantMapNotify: true, Nonce: uint64(i + 1),
			Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{
				TTL: 1440, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()), Authoritative: true,
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, MPriority: lisp.UnusedPriority, Reachable: true, Address: rloc(i)}},
			}},
		}
		var err error
		if r.buf, err = m.AppendSigned(r.buf, key); err != nil {
			return nil, fmt.Errorf("build Map-Register for %s: %w", p, err)
		}
		r.off = append(r.off, len(r.buf))
	}
	return r, nil
}

// answerSizes are the sizes of lispd's answers to the bench, which the
// reference server sends too: a Map-Reply for an IPv4 EID-prefix with one
// IPv4 RLOC, and a Map-Notify, which repeats its Map-Register's fields.
func answerSizes(regs *registers) EchoSizes {
	reply := lisp.MapReply{Records: []lisp.MapRecord{{
		EID: lisp.IPAddress(netip.IPv4Unspecified()), Locators: []lisp.Locator{{Address: rloc(0)}},
	}}}
	return EchoSizes{Reply: reply.Len(), Notify: len(regs.msg(0))}
}
