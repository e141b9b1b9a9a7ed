package traffic

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mptcp"
)

// setCongestion sets TCP_CONGESTION on a socket before it connects or
// listens. On an MPTCP socket it applies to every subflow, those opened
// later included.
func setCongestion(c syscall.RawConn, name string) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("set congestion control %q: %w", name, err)
	}
	return nil
}

// congestionControl reads back the congestion control a socket uses.
func congestionControl(c syscall.Conn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var name string
	var serr error
	err = rc.Control(func(fd uintptr) {
		name, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return "", fmt.Errorf("get congestion control: %w", err)
	}
	return strings.TrimRight(name, "\x00"), nil
}

// controlWith is a net.Dialer / net.ListenConfig Control that sets the
// congestion control on the new socket.
func controlWith(cc string) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error { return setCongestion(c, cc) }
}

// tcpInfoOffer is more than 6.18's struct tcp_info (280 bytes), so that a
// newer kernel's additions are not cut.
const tcpInfoOffer = 512

// readTCPInfo reads TCP_INFO from a TCP socket (or an MPTCP socket that
// fell back to TCP).
func readTCPInfo(c syscall.Conn) (mptcp.TCPInfo, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return mptcp.TCPInfo{}, err
	}
	buf := make([]byte, tcpInfoOffer)
	n := uint32(len(buf))
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	})
	runtime.KeepAlive(buf)
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return mptcp.TCPInfo{}, fmt.Errorf("getsockopt TCP_INFO: %w", err)
	}
	return mptcp.ParseTCPInfo(buf[:min(int(n), len(buf))]), nil
}

// isMPTCP reports whether c is an MPTCP connection that has not fallen
// back to TCP; Go's MPTCP dialer falls back silently when the kernel or
// the peer refuses MPTCP.
func isMPTCP(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	m, err := tc.MultipathTCP()
	return err == nil && m
}

// errNotSampled: the connection is neither TCP nor MPTCP (a test's pipe).
var errNotSampled = errors.New("not a TCP connection")
