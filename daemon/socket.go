package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// batch is how many datagrams a loop reads or writes per system call.
const batch = 64

// maxDatagram is the largest UDP payload: a Map-Register of 255 records
// can exceed any MTU, so buffers take whole datagrams.
const maxDatagram = 65535

// conn is one UDP control socket.
type conn struct {
	udp   *net.UDPConn
	pc    batchConn
	local netip.AddrPort
}

// batchConn reads and writes datagrams by the batch (recvmmsg/sendmmsg).
// ipv4.PacketConn and ipv6.PacketConn both are one.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
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
	c := &conn{udp: udp, local: udp.LocalAddr().(*net.UDPAddr).AddrPort()}
	if network == "udp4" {
		c.pc = ipv4.NewPacketConn(udp)
	} else {
		c.pc = ipv6.NewPacketConn(udp)
	}
	return c, nil
}

func (c *conn) close() { c.udp.Close() }

// worker is the state of one serving loop, reused from batch to batch so
// that answering allocates little.
type worker struct {
	in  []ipv4.Message
	ecm lisp.ECM
	out control.Outbox
	// send holds the datagrams of out as the kernel wants them, with
	// addresses whose storage is reused.
	send  []ipv4.Message
	addrs []net.UDPAddr
	ips   [][16]byte
}

func newWorker() *worker {
	w := &worker{in: make([]ipv4.Message, batch)}
	for i := range w.in {
		w.in[i].Buffers = [][]byte{make([]byte, maxDatagram)}
	}
	return w
}

// serve reads, handles and answers datagrams until the socket is closed.
func (d *Daemon) serve(c *conn) {
	w := newWorker()
	for {
		n, err := c.pc.ReadBatch(w.in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Warn("read", "socket", c.local, "error", err)
			continue
		}
		w.out.Reset()
		for i := range n {
			m := &w.in[i]
			from := m.Addr.(*net.UDPAddr).AddrPort()
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			if m.Flags&unix.MSG_TRUNC != 0 {
				d.counter.oversized.Add(1)
				continue
			}
			d.handle(w, m.Buffers[0][:m.N], from)
		}
		d.flush(c, w)
	}
}

// flush sends what the handlers queued, each datagram from a socket of
// its destination's family (this one when it can).
func (d *Daemon) flush(c *conn, w *worker) {
	for len(w.send) < w.out.Len() {
		w.send = append(w.send, ipv4.Message{Buffers: make([][]byte, 1)})
		w.addrs = append(w.addrs, net.UDPAddr{})
		w.ips = append(w.ips, [16]byte{})
	}
	pending := 0
	for i := range w.out.Len() {
		dst, payload := w.out.At(i)
		out := d.connFor(c, dst.Addr())
		if out == nil {
			d.counter.unroutable.Add(1)
			continue
		}
		if out != c { // rare: an answer in the other family
			if _, err := out.udp.WriteToUDPAddrPort(payload, dst); err != nil {
				d.counter.sendErrors.Add(1)
			} else {
				d.counter.sent.Add(1)
			}
			continue
		}
		m := &w.send[pending]
		m.Buffers[0] = payload
		m.Addr = w.udpAddr(pending, dst)
		pending++
	}
	for sent := 0; sent < pending; {
		n, err := c.pc.WriteBatch(w.send[sent:pending], 0)
		if err != nil {
			d.counter.sendErrors.Add(uint64(pending - sent))
			d.log.Debug("write", "socket", c.local, "error", err)
			return
		}
		sent += n
		d.counter.sent.Add(uint64(n))
	}
}

// udpAddr returns dst as a *net.UDPAddr in slot i's reused storage.
func (w *worker) udpAddr(i int, dst netip.AddrPort) *net.UDPAddr {
	a := &w.addrs[i]
	w.ips[i] = dst.Addr().As16()
	if dst.Addr().Is4() {
		a.IP = w.ips[i][12:16]
	} else {
		a.IP = w.ips[i][:]
	}
	a.Port = int(dst.Port())
	return a
}

// connFor picks the socket to send to dst from: c if it is of dst's
// family, else the first that is.
func (d *Daemon) connFor(c *conn, dst netip.Addr) *conn {
	if c.local.Addr().Is4() == dst.Is4() {
		return c
	}
	for _, o := range d.conns {
		if o.local.Addr().Is4() == dst.Is4() {
			return o
		}
	}
	return nil
}
