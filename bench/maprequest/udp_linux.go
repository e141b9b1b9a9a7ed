package maprequest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketBuffer is what the generator asks for its own socket buffers:
// replies must never be dropped at the generator, or the losses would be
// blamed on the server. (The servers keep the kernel's defaults, as a
// deployed lispd does.)
const socketBuffer = 8 << 20

// udpConn is the generator's UDP socket. It calls sendmmsg and recvmmsg
// itself rather than through x/net's ReadBatch, which allocates an
// address for every datagram received: the generator must stay well
// ahead of the server it measures, so its loop allocates nothing and
// never parks in the Go scheduler.
//
// With one flow it is connected to the server. With several it sends each
// datagram from another loopback address of 127.64.0.0/10 (IP_PKTINFO),
// the flows taking turns, and receives the answers to all of them: a
// server with several SO_REUSEPORT sockets gets the flows spread over
// its loops by the kernel's hash, as it would get many peers. The
// requests still ask to be answered at local, whatever flow sent them.
type udpConn struct {
	fd    int
	local netip.AddrPort
	flows int
	next  int                   // the flow of the next datagram sent
	dst   unix.RawSockaddrInet4 // the server, for an unconnected socket
}

// flowSource is the source address of flow i of several.
func flowSource(i int) [4]byte {
	return [4]byte{127, 64 | byte(i>>16)&63, byte(i >> 8), byte(i)}
}

// maxFlows is the most flows dialUDP sends from.
const maxFlows = 1 << 16

func dialUDP(server netip.AddrPort, flows int) (*udpConn, error) {
	if !server.Addr().Is4() {
		return nil, fmt.Errorf("dial %s: only IPv4 is supported", server)
	}
	if flows < 1 || flows > maxFlows || (flows > 1 && !server.Addr().IsLoopback()) {
		return nil, fmt.Errorf("dial %s: %d flows: want 1, or up to %d to a loopback address", server, flows, maxFlows)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open socket: %w", err)
	}
	c := &udpConn{fd: fd, flows: flows}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		// The FORCE variants need CAP_NET_ADMIN; without it the plain ones
		// get what net.core.[rw]mem_max allows.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], socketBuffer) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], socketBuffer)
		}
	}
	// The kernel stamps each reply as it arrives, so that a latency does
	// not include the time the reply waited for the generator to read it.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		c.close()
		return nil, fmt.Errorf("ask for receive timestamps: %w", err)
	}
	local := &unix.SockaddrInet4{Addr: server.Addr().As4()} // the same loopback address, any port
	if flows > 1 {
		local.Addr = [4]byte{} // answers come to the flows' addresses too
	}
	if err := unix.Bind(fd, local); err != nil {
		c.close()
		return nil, fmt.Errorf("bind socket: %w", err)
	}
	if flows == 1 {
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: server.Addr().As4(), Port: int(server.Port())}); err != nil {
			c.close()
			return nil, fmt.Errorf("connect to %s: %w", server, err)
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("read socket address: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		c.close()
		return nil, errors.New("read socket address: not IPv4")
	}
	c.local = netip.AddrPortFrom(server.Addr(), uint16(in4.Port))
	c.dst = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: server.Addr().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&c.dst.Port))[:], server.Port())
	return c, nil
}

func (c *udpConn) close() { unix.Close(c.fd) }

// batch is a set of datagram buffers with the message headers that
// sendmmsg and recvmmsg take, built once.
type batch struct {
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs [][]byte // each of full capacity; send uses bufs[i][:lens[i]]
	ctl  []byte   // room for each message's receive timestamp
}

// ctlSize holds one control message with a struct timespec.
var ctlSize = unix.CmsgSpace(16)

func newBatch(n, size int) *batch {
	b := &batch{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n), bufs: make([][]byte, n),
		ctl: make([]byte, n*ctlSize)}
	slab := make([]byte, n*size)
	for i := range n {
		b.bufs[i] = slab[i*size : (i+1)*size : (i+1)*size]
		b.point(i, b.bufs[i])
	}
	return b
}

// point makes message i of the batch send or receive p.
func (b *batch) point(i int, p []byte) {
	b.iovs[i].Base = unsafe.SliceData(p)
	b.iovs[i].SetLen(len(p))
	b.hdrs[i].Hdr.Iov = &b.iovs[i]
	b.hdrs[i].Hdr.SetIovlen(1)
}

// received is the i-th datagram of the last recv.
func (b *batch) received(i int) []byte { return b.bufs[i][:b.hdrs[i].Len] }

// arrival is when the i-th datagram of the last recv reached the socket,
// in Unix nanoseconds, from its SCM_TIMESTAMPNS control message.
func (b *batch) arrival(i int) (int64, bool) {
	h := &b.hdrs[i].Hdr
	ctl := b.ctl[i*ctlSize : i*ctlSize+int(h.Controllen)]
	if len(ctl) < unix.CmsgLen(16) {
		return 0, false
	}
	cm := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	if cm.Level != unix.SOL_SOCKET || cm.Type != unix.SCM_TIMESTAMPNS {
		return 0, false
	}
	ts := (*unix.Timespec)(unsafe.Pointer(&ctl[unix.CmsgLen(0)]))
	return ts.Nano(), true
}

// send sends the first n messages of b, without waiting; it returns how
// many the kernel took (0 when the socket buffer is full).
func (c *udpConn) send(b *batch, n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	if c.flows > 1 {
		for i := range n {
			c.address(b, i, (c.next+i)%c.flows)
		}
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
		uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0:
		c.next = (c.next + int(r)) % c.flows
		return int(r), nil
	case unix.EAGAIN, unix.ENOBUFS, unix.EINTR:
		return 0, nil
	}
	return 0, fmt.Errorf("send: %w", errno)
}

// address makes message i of b go to the server from the address of
// flow f, with an IP_PKTINFO control message in the message's room for
// one.
func (c *udpConn) address(b *batch, i, f int) {
	h := &b.hdrs[i].Hdr
	h.Name = (*byte)(unsafe.Pointer(&c.dst))
	h.Namelen = unix.SizeofSockaddrInet4
	ctl := b.ctl[i*ctlSize : (i+1)*ctlSize]
	cm := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	cm.Level, cm.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	cm.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	info := (*unix.Inet4Pktinfo)(unsafe.Pointer(&ctl[unix.CmsgLen(0)]))
	*info = unix.Inet4Pktinfo{Spec_dst: flowSource(f)}
	h.Control = &ctl[0]
	h.SetControllen(unix.CmsgSpace(unix.SizeofInet4Pktinfo))
}

// recv receives what has arrived, up to len(b.hdrs) datagrams, without
// waiting. A refused connection means the server is gone.
func (c *udpConn) recv(b *batch) (int, error) {
	for i := range b.hdrs {
		b.iovs[i].SetLen(cap(b.bufs[i]))
		b.hdrs[i].Hdr.Control = &b.ctl[i*ctlSize]
		b.hdrs[i].Hdr.SetControllen(ctlSize)
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
		uintptr(len(b.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0:
		return int(r), nil
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	}
	return 0, fmt.Errorf("receive: %w", errno)
}

// wait blocks until a datagram arrives or d passes. It blocks in the
// kernel, not in the Go scheduler, so waking up costs no thread handoff.
func (c *udpConn) wait(d time.Duration) error {
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(d))
	if _, err := unix.Ppoll(fds, &ts, nil); err != nil && err != unix.EINTR {
		return fmt.Errorf("wait for replies: %w", err)
	}
	return nil
}
