package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/udpbatch"
	"github.com/amptcp/amptcp/lisp"
)

// batch is how many datagrams a loop reads or writes per system call.
const batch = 64

// maxDatagram is the largest UDP payload: a Map-Register of 255 records
// can exceed any MTU, so buffers take whole datagrams.
const maxDatagram = 65535

// socketBuffer is what lispd asks for its sockets' buffers: bursts of
// Map-Requests wait in the kernel rather than being dropped (the default
// holds about 270 small datagrams).
const socketBuffer = 4 << 20

// spin is how long a loop polls an empty socket before parking: under
// load the next datagram comes sooner than a parked goroutine wakes.
const spin = 20 * time.Microsecond

// conn is one UDP control socket.
type conn struct {
	udp   *net.UDPConn
	batch *udpbatch.Conn
	local netip.AddrPort
}

func listen(ap netip.AddrPort) (*conn, error) {
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6" // IPv6 only: IPv4 has its own socket
	}
	udp, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", ap, err)
	}
	b, err := udpbatch.New(udp, batch, maxDatagram, spin)
	if err == nil {
		err = b.SetBuffers(socketBuffer)
	}
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("listen on %s: %w", ap, err)
	}
	return &conn{udp: udp, batch: b, local: udp.LocalAddr().(*net.UDPAddr).AddrPort()}, nil
}

func (c *conn) close() { c.udp.Close() }

// worker is the state of one serving loop, reused from batch to batch so
// that answering allocates little.
type worker struct {
	ecm      lisp.ECM
	req      lisp.MapRequest
	reply    lisp.MapReply
	out      control.Outbox
	dsts     []netip.AddrPort
	payloads [][]byte
}

// serve reads, handles and answers datagrams until the socket is closed.
func (d *Daemon) serve(c *conn) {
	w := &worker{}
	for {
		n, err := c.batch.Read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Warn("read", "socket", c.local, "error", err)
			continue
		}
		w.out.Reset()
		for i := range n {
			pkt, from, truncated := c.batch.Datagram(i)
			if truncated {
				d.counter.oversized.Add(1)
				continue
			}
			d.handle(w, pkt, from)
		}
		d.flush(c, w)
	}
}

// flush sends what the handlers queued, each datagram from a socket of
// its destination's family (this one when it can).
func (d *Daemon) flush(c *conn, w *worker) {
	w.dsts, w.payloads = w.dsts[:0], w.payloads[:0]
	for i := range w.out.Len() {
		dst, payload := w.out.At(i)
		switch out := d.connFor(c, dst.Addr()); out {
		case c:
			w.dsts, w.payloads = append(w.dsts, dst), append(w.payloads, payload)
		case nil:
			d.counter.unroutable.Add(1)
		default: // rare: an answer in the other family
			if _, err := out.udp.WriteToUDPAddrPort(payload, dst); err != nil {
				d.counter.sendErrors.Add(1)
			} else {
				d.counter.sent.Add(1)
			}
		}
	}
	if len(w.dsts) == 0 {
		return
	}
	if err := c.batch.Write(w.dsts, w.payloads); err != nil {
		d.counter.sendErrors.Add(1)
		d.log.Debug("write", "socket", c.local, "error", err)
		return
	}
	d.counter.sent.Add(uint64(len(w.dsts)))
}

// connFor picks the socket to send to dst from: c if it is of dst's
// family, else the first that is (c may be nil).
func (d *Daemon) connFor(c *conn, dst netip.Addr) *conn {
	if c != nil && c.local.Addr().Is4() == dst.Is4() {
		return c
	}
	for _, o := range d.conns {
		if o.local.Addr().Is4() == dst.Is4() {
			return o
		}
	}
	return nil
}
