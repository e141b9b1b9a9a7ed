package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/udpbatch"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// A loop's datagrams per system call, largest datagram and polling
// before it parks (udpbatch's, which the bench's reference shares).
const (
	batch       = udpbatch.ServerBatch
	maxDatagram = udpbatch.ServerDatagram
	spin        = udpbatch.ServerSpin
)

// socketBuffer is what lispd asks for its sockets' buffers: bursts of
// Map-Requests wait in the kernel rather than being dropped (the default
// holds about 270 small datagrams).
const socketBuffer = udpbatch.ServerBuffer

// conn is one UDP control socket.
type conn struct {
	udp   *net.UDPConn
	batch *udpbatch.Conn
	local netip.AddrPort
	// more are the other sockets bound to local, one per serving loop
	// beyond the first (see listen).
	more []*conn
	// loop is the state of the loop that serves this socket.
	loop worker
}

// listen opens the sockets of one listen address, one per serving loop
// (udpbatch.ListenGroup: a peer's datagrams all go to one loop, in order).
func listen(ap netip.AddrPort, loops int) (*conn, error) {
	network := "udp4"
	if ap.Addr().Is6() {
		network = "udp6" // IPv6 only: IPv4 has its own socket
	}
	udps, err := udpbatch.ListenGroup(network, ap, loops)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", ap, err)
	}
	var c *conn
	for i, u := range udps {
		s, err := newConn(u)
		if err != nil {
			for _, u := range udps[i:] {
				u.Close()
			}
			if c != nil {
				c.close()
			}
			return nil, fmt.Errorf("listen on %s: %w", ap, err)
		}
		if c == nil {
			c = s
		} else {
			c.more = append(c.more, s)
		}
	}
	return c, nil
}

// newConn sets up a bound socket for batched I/O.
func newConn(udp *net.UDPConn) (*conn, error) {
	b, err := udpbatch.New(udp, batch, maxDatagram, spin)
	if err == nil {
		err = b.SetBuffers(socketBuffer)
	}
	if err != nil {
		return nil, err
	}
	return &conn{udp: udp, batch: b, local: udp.LocalAddr().(*net.UDPAddr).AddrPort()}, nil
}

// sockets are c's sockets, each served by its own loop.
func (c *conn) sockets() []*conn { return append([]*conn{c}, c.more...) }

func (c *conn) close() {
	c.udp.Close()
	for _, m := range c.more {
		m.udp.Close()
	}
}

// worker is the state of one serving loop, reused from batch to batch so
// that answering allocates little. Its counters are its own, so that loops
// on different CPUs do not contend for them; Counters adds them up.
type worker struct {
	counter  counters
	ecm      lisp.ECM
	req      lisp.MapRequest
	reply    lisp.MapReply
	out      control.Outbox
	dsts     []netip.AddrPort
	payloads [][]byte
	queries  []mapping.Query // a batch's EIDs and prefixes, for prefetch
	prefixes []mapping.EID
	read     uint32 // what prefetch read, kept so that its reads are made
}

// serve reads, handles and answers datagrams until the socket is closed.
func (d *Daemon) serve(c *conn) {
	w := &c.loop
	for {
		n, err := c.batch.Read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Warn("read", "socket", c.local, "error", err)
			continue
		}
		w.counter.datagrams.Add(uint64(n))
		w.out.Reset()
		d.prefetch(w, c.batch, n)
		for i := range n {
			pkt, from, truncated := c.batch.Datagram(i)
			if truncated {
				w.counter.oversized.Add(1)
				continue
			}
			d.handle(w, pkt, from)
		}
		d.flush(c, w)
	}
}

// datagrams is a batch of datagrams received: a socket's (udpbatch.Conn)
// or a benchmark's.
type datagrams interface {
	Datagram(i int) (payload []byte, from netip.AddrPort, truncated bool)
}

// prefetch reads ahead what answering the batch will read of the
// map-server's registrations, all at once: for its Map-Requests the
// mappings they ask for (mapserver.Server.Prefetch), for its Map-Registers
// where their prefixes go (PrefetchRegisters). The cache misses of their
// lookups then overlap, where one datagram after the other pays for each;
// handling them reads from the CPU's caches. The EIDs come from a peek at
// each message (lisp.PeekRequestEID, PeekRegisterPrefix), which the
// handlers still decode whole and, for a Map-Register, authenticate
// before anything changes.
func (d *Daemon) prefetch(w *worker, b datagrams, n int) {
	if n < 2 || d.ms == nil {
		return
	}
	w.queries, w.prefixes = w.queries[:0], w.prefixes[:0]
	for i := range n {
		pkt, _, truncated := b.Datagram(i)
		if truncated || len(pkt) == 0 {
			continue
		}
		switch lisp.MsgType(pkt[0] >> 4) {
		case lisp.TypeECM:
			if iid, eid, ok := lisp.PeekRequestEID(pkt); ok && d.mr != nil {
				w.queries = append(w.queries, mapping.Query{IID: iid, Addr: eid})
			}
		case lisp.TypeMapRegister:
			if iid, p, ok := lisp.PeekRegisterPrefix(pkt); ok {
				w.prefixes = append(w.prefixes, mapping.EID{IID: iid, Prefix: p})
			}
		}
	}
	if len(w.queries) > 1 {
		w.read += d.ms.Prefetch(w.queries)
	}
	if len(w.prefixes) > 1 {
		w.read += d.ms.PrefetchRegisters(w.prefixes)
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
			w.counter.unroutable.Add(1)
		default: // rare: an answer in the other family
			if _, err := out.udp.WriteToUDPAddrPort(payload, dst); err != nil {
				w.counter.sendErrors.Add(1)
			} else {
				w.counter.sent.Add(1)
			}
		}
	}
	if len(w.dsts) == 0 {
		return
	}
	if err := c.batch.Write(w.dsts, w.payloads); err != nil {
		w.counter.sendErrors.Add(1)
		d.log.Debug("write", "socket", c.local, "error", err)
		return
	}
	w.counter.sent.Add(uint64(len(w.dsts)))
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

// WithLoops sets how many loops serve each listen address, each with a
// socket of its own (see listen): one per CPU lispd may use
// (GOMAXPROCS) by default.
func WithLoops(n int) Option {
	return func(o *options) { o.loops = max(n, 1) }
}
