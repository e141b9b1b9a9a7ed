// Package tcpinfo reads what the kernel says of a TCP connection
// (TCP_INFO): for the checks and benchmarks that tell a connection whose
// first packets were lost from one whose were not.
package tcpinfo

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Retransmits is how many segments the connection retransmitted so far,
// its SYN's included (tcpi_total_retrans).
func Retransmits(c net.Conn) (uint32, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, errors.New("tcpinfo: not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("tcpinfo: %w", err)
	}
	var info *unix.TCPInfo
	if cerr := raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil {
		return 0, fmt.Errorf("tcpinfo: %w", cerr)
	}
	if err != nil {
		return 0, fmt.Errorf("tcpinfo: TCP_INFO: %w", err)
	}
	return info.Total_retrans, nil
}
