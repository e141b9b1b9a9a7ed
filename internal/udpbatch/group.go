package udpbatch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenGroup opens n UDP sockets bound to addr ("udp4" or "udp6"
// network), for n serving loops. With more than one they share the
// address with SO_REUSEPORT, and the kernel hands each datagram to one of
// them by a hash of its addresses and ports: the datagrams of one peer
// (one source address and port) all go to the same socket, in the order
// they came, while many peers spread over the sockets.
//
// The first socket is bound without SO_REUSEPORT and allowed to share
// only once bound: had it asked before, a port the kernel picks for port
// 0 could be one that sockets of another process of the same user share
// already. The others bind to the first's address and port.
func ListenGroup(network string, addr netip.AddrPort, n int) ([]*net.UDPConn, error) {
	first, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	conns := []*net.UDPConn{first}
	if n > 1 {
		err = reusePort(first)
	}
	local := first.LocalAddr().String()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error { return reusePortRaw(rc) }}
	for len(conns) < n && err == nil {
		var pc net.PacketConn
		if pc, err = lc.ListenPacket(context.Background(), network, local); err == nil {
			conns = append(conns, pc.(*net.UDPConn))
		}
	}
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	return conns, nil
}

func reusePort(u *net.UDPConn) error {
	rc, err := u.SyscallConn()
	if err != nil {
		return err
	}
	return reusePortRaw(rc)
}

func reusePortRaw(rc syscall.RawConn) error {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("SO_REUSEPORT: %w", err)
	}
	return nil
}
