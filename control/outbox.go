// Package control holds what the control-plane roles of lispd share: the
// outbox their handlers fill with datagrams to send, the sender their
// timers send with, nonces and the reading of EIDs and ITR-RLOCs. The
// roles themselves are its subpackages: mapserver and resolver (the
// mapping system), xtr, mapcache and probe (the tunnel routers).
package control

import (
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// Outbox collects the datagrams that handlers want sent from port 4342.
// Payloads are packed into one buffer, so a batch of replies allocates
// nothing once the buffer has grown; Reset reuses it.
type Outbox struct {
	buf  []byte
	pkts []datagram
}

type datagram struct {
	dst        netip.AddrPort
	start, end int
}

// Reset empties the outbox, keeping its storage.
func (o *Outbox) Reset() {
	o.buf, o.pkts = o.buf[:0], o.pkts[:0]
}

// Len is the number of datagrams queued.
func (o *Outbox) Len() int { return len(o.pkts) }

// At returns the i-th datagram. The payload is valid until the next
// Append or Reset.
func (o *Outbox) At(i int) (netip.AddrPort, []byte) {
	p := o.pkts[i]
	return p.dst, o.buf[p.start:p.end]
}

// Begin returns the buffer to append one datagram to; Commit queues it.
// Encoding with a concrete type's AppendBinary between the two allocates
// nothing, where AppendMessage's interface makes the message escape.
func (o *Outbox) Begin() []byte { return o.buf }

// Commit queues for dst what was appended to the buffer since Begin.
func (o *Outbox) Commit(dst netip.AddrPort, b []byte) {
	start := len(o.buf)
	o.buf = b
	o.pkts = append(o.pkts, datagram{dst, start, len(o.buf)})
}

// AppendBytes queues a copy of b for dst.
func (o *Outbox) AppendBytes(dst netip.AddrPort, b []byte) {
	start := len(o.buf)
	o.buf = append(o.buf, b...)
	o.pkts = append(o.pkts, datagram{dst, start, len(o.buf)})
}

// AppendMessage queues m, encoded, for dst.
func (o *Outbox) AppendMessage(dst netip.AddrPort, m lisp.Message) error {
	start := len(o.buf)
	b, err := m.AppendBinary(o.buf)
	if err != nil {
		return err
	}
	o.buf = b
	o.pkts = append(o.pkts, datagram{dst, start, len(o.buf)})
	return nil
}

// Signer is a message that carries authentication data.
type Signer interface {
	AppendSigned(b, key []byte) ([]byte, error)
}

// AppendSigned queues m, encoded and authenticated with key, for dst.
func (o *Outbox) AppendSigned(dst netip.AddrPort, m Signer, key []byte) error {
	start := len(o.buf)
	b, err := m.AppendSigned(o.buf, key)
	if err != nil {
		return err
	}
	o.buf = b
	o.pkts = append(o.pkts, datagram{dst, start, len(o.buf)})
	return nil
}
