// Package udpbatch reads and writes UDP datagrams by the batch (recvmmsg,
// sendmmsg) on a *net.UDPConn, through Go's poller so that a blocked read
// parks the goroutine and Close wakes it, and without allocating per
// datagram: the message headers, buffers and addresses are built once.
// x/net's ReadBatch allocates an address for every datagram received,
// which a server answering hundreds of thousands of requests a second
// pays for in garbage collection. ListenGroup opens the sockets of a
// server with one serving loop per CPU.
package udpbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn is a UDP socket read and written by the batch. It is not safe for
// concurrent use: a serving loop owns it.
type Conn struct {
	raw  syscall.RawConn
	is6  bool
	spin time.Duration

	in   batch
	out  batch
	n    int // datagrams of the last Read
	last int // of the one before: when it filled a quarter of a batch, Read spins
	err  error

	// The callbacks given to the poller, bound once: a method value or a
	// closure made per call would be an allocation per call.
	recvFn, sendFn func(fd uintptr) bool
	toSend, sent   int
	dsts           []netip.AddrPort
}

// batch is a set of message headers with their buffers and addresses.
type batch struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for IPv4 too
	bufs  [][]byte
}

func newBatch(n, size int) batch {
	b := batch{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n), bufs: make([][]byte, n)}
	var slab []byte
	if size > 0 {
		slab = make([]byte, n*size)
	}
	for i := range n {
		if size > 0 {
			b.bufs[i] = slab[i*size : (i+1)*size : (i+1)*size]
		}
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.SetIovlen(1)
		b.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	}
	return b
}

// New wraps u for batches of up to n datagrams of up to size bytes. spin
// is how long Read polls an empty socket before it parks the goroutine,
// when the Read before brought at least a quarter of a batch: under a
// load that fills batches, the next datagram comes sooner than a parked
// goroutine wakes. Under a lighter load it parks at once: a loop that
// polls between every few datagrams looks to the kernel like a task that
// never sleeps, which other tasks on its CPU then delay by whole time
// slices, where a task that sleeps gets its CPU back as soon as it wakes
// (docs/mapping.md, "Performance", measures what that does to latency).
func New(u *net.UDPConn, n, size int, spin time.Duration) (*Conn, error) {
	raw, err := u.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("udpbatch: %w", err)
	}
	local, ok := u.LocalAddr().(*net.UDPAddr)
	if !ok {
		return nil, errors.New("udpbatch: not a bound UDP socket")
	}
	c := &Conn{raw: raw, is6: local.AddrPort().Addr().Is6(), spin: spin,
		in: newBatch(n, size), out: newBatch(n, 0)}
	c.recvFn, c.sendFn = c.recv, c.send
	return c, nil
}

// The batch size, datagram size and polling (New's n, size and spin)
// of lispd's serving loops, which amptcp bench map-request's reference
// server takes too, so that the two do the same I/O.
const (
	// ServerBatch is how many datagrams a loop reads or writes per
	// system call.
	ServerBatch = 64
	// ServerDatagram is the largest UDP payload: a Map-Register of 255
	// records can exceed any MTU, so buffers take whole datagrams.
	ServerDatagram = 65535
	// ServerSpin is how long a loop polls an empty socket before parking:
	// under load the next datagram comes sooner than a parked goroutine
	// wakes.
	ServerSpin = 20 * time.Microsecond
)

// ServerBuffer is what lispd asks for its sockets' buffers (SetBuffers):
// bursts of Map-Requests wait in the kernel rather than being dropped
// (the default holds about 270 small datagrams). amptcp bench
// map-request's reference server asks for the same, so that the two
// queue alike when their CPU is taken.
const ServerBuffer = 4 << 20

// SetBuffers asks for socket buffers of size bytes each way, beyond the
// net.core limits when the process may (CAP_NET_ADMIN): a burst of
// requests then waits in the kernel instead of being dropped.
func (c *Conn) SetBuffers(size int) error { return setBuffers(c.raw, size) }

// SetBuffers is Conn.SetBuffers for a socket read otherwise.
func SetBuffers(u *net.UDPConn, size int) error {
	raw, err := u.SyscallConn()
	if err != nil {
		return fmt.Errorf("udpbatch: %w", err)
	}
	return setBuffers(raw, size)
}

func setBuffers(raw syscall.RawConn, size int) error {
	var err error
	cerr := raw.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], size) != nil {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], size)
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// Read waits for datagrams and returns how many arrived (at least one),
// to be read with Datagram.
func (c *Conn) Read() (int, error) {
	for i := range c.in.hdrs {
		c.in.iovs[i].Base = unsafe.SliceData(c.in.bufs[i])
		c.in.iovs[i].SetLen(cap(c.in.bufs[i]))
		c.in.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		c.in.hdrs[i].Hdr.Flags = 0
	}
	c.n, c.err = 0, nil
	if err := c.raw.Read(c.recvFn); err != nil {
		return 0, err
	}
	c.last = c.n
	return c.n, c.err
}

// busy reports whether the last Read found the socket busy enough for
// the next to poll it.
func (c *Conn) busy() bool { return c.last >= max(1, len(c.in.hdrs)/4) }

// recv is Read's callback: it returns false to park until the socket is
// readable, after polling for c.spin when the socket is busy.
func (c *Conn) recv(fd uintptr) bool {
	var deadline time.Time
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&c.in.hdrs[0])),
			uintptr(len(c.in.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			c.n = int(r)
			return true
		case unix.EAGAIN, unix.EINTR:
		default:
			c.err = fmt.Errorf("recvmmsg: %w", errno)
			return true
		}
		if c.spin <= 0 || !c.busy() {
			return false
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(c.spin)
		} else if now.After(deadline) {
			return false
		}
	}
}

// Datagram returns the i-th datagram of the last Read: its payload (valid
// until the next Read), its source, and whether it was cut to the buffer.
func (c *Conn) Datagram(i int) ([]byte, netip.AddrPort, bool) {
	h := &c.in.hdrs[i]
	return c.in.bufs[i][:h.Len], sockaddr(&c.in.names[i]), h.Hdr.Flags&unix.MSG_TRUNC != 0
}

// Write sends payloads[i] to dsts[i], up to the batch size at a time,
// waiting for the socket to take them all.
func (c *Conn) Write(dsts []netip.AddrPort, payloads [][]byte) error {
	for len(dsts) > 0 {
		n := min(len(dsts), len(c.out.hdrs))
		for i := range n {
			if !c.is6 && !dsts[i].Addr().Unmap().Is4() {
				return fmt.Errorf("udpbatch: %s is not IPv4, as the socket is", dsts[i])
			}
			c.out.iovs[i].Base = unsafe.SliceData(payloads[i])
			c.out.iovs[i].SetLen(len(payloads[i]))
			c.out.hdrs[i].Hdr.Namelen = putSockaddr(&c.out.names[i], dsts[i], c.is6)
		}
		c.toSend, c.sent, c.err, c.dsts = n, 0, nil, dsts
		if err := c.raw.Write(c.sendFn); err != nil {
			return err
		}
		if c.err != nil {
			return c.err
		}
		dsts, payloads = dsts[n:], payloads[n:]
	}
	return nil
}

// send is Write's callback: it returns false to wait until the socket is
// writable.
func (c *Conn) send(fd uintptr) bool {
	for c.sent < c.toSend {
		r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&c.out.hdrs[c.sent])),
			uintptr(c.toSend-c.sent), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			c.sent += int(r)
		case unix.EAGAIN:
			return false
		case unix.EINTR:
		default:
			// The datagram the kernel refused (unreachable, too big) is
			// dropped; the rest go on.
			c.err = fmt.Errorf("sendmmsg to %s: %w", c.dsts[c.sent], errno)
			c.sent++
		}
	}
	return true
}

// sockaddr reads an IPv4 or IPv6 socket address; an IPv4-mapped IPv6 one
// comes out as IPv4.
func sockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	if sa.Family == unix.AF_INET {
		in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
}

// putSockaddr writes dst as the socket address of an IPv4 or IPv6 socket
// and returns its length.
func putSockaddr(sa *unix.RawSockaddrInet6, dst netip.AddrPort, is6 bool) uint32 {
	port := (*[2]byte)(unsafe.Pointer(&sa.Port))[:]
	binary.BigEndian.PutUint16(port, dst.Port())
	if !is6 {
		in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		in4.Family = unix.AF_INET
		in4.Addr = dst.Addr().Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	sa.Addr = dst.Addr().As16()
	sa.Flowinfo, sa.Scope_id = 0, 0
	return unix.SizeofSockaddrInet6
}
