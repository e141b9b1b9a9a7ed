package control

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// Port is where LISP control messages go (RFC 9301 §5.1).
const Port = 4342

// Sender sends one datagram from port 4342, on the daemon's socket of
// dst's family. The roles of tunnel routers send from their own timers
// (registrations, Map-Requests on a miss, RLOC probes), outside the
// serving loops that fill an Outbox, so a Sender is safe for concurrent
// use.
type Sender interface {
	Send(dst netip.AddrPort, payload []byte) error
}

// SenderFunc is a function that is a Sender.
type SenderFunc func(dst netip.AddrPort, payload []byte) error

func (f SenderFunc) Send(dst netip.AddrPort, payload []byte) error { return f(dst, payload) }

// Nonce returns a random nonce for a Map-Request or Map-Register: an
// off-path attacker must not guess it to forge the answer (RFC 9301 §9).
func Nonce() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return binary.BigEndian.Uint64(b[:])
}

// ReplyAddr picks the ITR-RLOC to answer a Map-Request at: the first of
// the family the request came from (which a socket exists for), else the
// first IP address.
func ReplyAddr(itrRLOCs []lisp.Address, from netip.Addr) (netip.Addr, bool) {
	var first netip.Addr
	for _, a := range itrRLOCs {
		ip := a.IP()
		if !ip.IsValid() {
			continue
		}
		if ip.Is4() == from.Unmap().Is4() {
			return ip, true
		}
		if !first.IsValid() {
			first = ip
		}
	}
	return first, first.IsValid()
}

// EIDOf reads the instance ID and IP address of an EID as Map-Requests
// carry it: a plain address, or one in an Instance-ID LCAF; the
// destination of a stateful request's flow (FlowOf) too.
func EIDOf(a lisp.Address) (iid uint32, eid netip.Addr, ok bool) {
	iid, _, eid, ok = unwrap(a)
	return iid, eid, ok
}

// EIDAddress is the wire form of an EID: in an Instance-ID LCAF when iid
// is not 0, as mapping.EID.Wire writes prefixes.
func EIDAddress(iid uint32, ip netip.Addr) lisp.Address {
	a := lisp.IPAddress(ip)
	if iid != 0 {
		a = lisp.LCAFAddress(&lisp.InstanceID{IID: iid, Address: a})
	}
	return a
}
