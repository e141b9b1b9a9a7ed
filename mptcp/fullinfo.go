package mptcp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The MPTCP socket options (SOL_MPTCP).
const (
	solMPTCP      = 284
	mptcpFullInfo = 4 // MPTCP_FULL_INFO, Linux 6.5
)

// FullInfo is what MPTCP_FULL_INFO returns for one MPTCP socket: the
// connection's mptcp_info and, per subflow, its addresses and tcp_info.
type FullInfo struct {
	Info     Info
	Subflows []SubflowInfo
}

// SubflowInfo is one subflow in a FullInfo.
type SubflowInfo struct {
	// ID is the kernel's number of the subflow within its connection
	// (1 for the initial one, then counting up as subflows are created),
	// not the local address ID of the path manager.
	ID            uint8
	Local, Remote netip.AddrPort
	TCP           TCPInfo
}

// The layout of struct mptcp_full_info: six u32 sizes and counts, two
// aligned u64 user pointers, then struct mptcp_info.
const (
	fullInfoSizeTCPInfoKernel = 0
	fullInfoSizeTCPInfoUser   = 4
	fullInfoSizeSfInfoKernel  = 8
	fullInfoSizeSfInfoUser    = 12
	fullInfoNumSubflows       = 16
	fullInfoSizeArraysUser    = 20
	fullInfoSubflowInfoPtr    = 24
	fullInfoTCPInfoPtr        = 32
	fullInfoMPTCPInfo         = 40
)

// Sizes offered to the kernel: more than 6.18's structures (tcp_info 280,
// mptcp_subflow_info 264, mptcp_info 96), so that a newer kernel's
// additions are not cut; the kernel writes back what it filled.
const (
	offerTCPInfo   = 512
	offerSfInfo    = 264 // u32 id, 4 bytes of padding, two sockaddr_storage
	offerMPTCPInfo = 256
)

// ReadFullInfo reads MPTCP_FULL_INFO from an MPTCP socket (a *net.TCPConn
// or *net.TCPListener from Go's MPTCP dialer or listener, or any
// syscall.Conn). It takes 0.1-0.4 ms, cheap enough to sample every 100 ms.
// A socket that is not MPTCP, or that fell back to TCP, gives EOPNOTSUPP.
func ReadFullInfo(c syscall.Conn) (*FullInfo, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("mptcp: full info: %w", err)
	}
	n := 8 // subflows room: grown and retried when the kernel has more
	for {
		fi, more, err := readFullInfo(rc, n)
		if err != nil {
			return nil, err
		}
		if more <= n {
			return fi, nil
		}
		n = more
	}
}

// readFullInfo asks for at most n subflows and returns how many the
// connection has.
func readFullInfo(rc syscall.RawConn, n int) (*FullInfo, int, error) {
	hdr := make([]byte, fullInfoMPTCPInfo+offerMPTCPInfo)
	sf := make([]byte, n*offerSfInfo)
	tcp := make([]byte, n*offerTCPInfo)
	ne := binary.NativeEndian
	ne.PutUint32(hdr[fullInfoSizeTCPInfoUser:], offerTCPInfo)
	ne.PutUint32(hdr[fullInfoSizeSfInfoUser:], offerSfInfo)
	ne.PutUint32(hdr[fullInfoSizeArraysUser:], uint32(n))
	// The kernel writes through these user pointers: the slices are heap
	// memory (Go does not move it) kept alive until after the call.
	ne.PutUint64(hdr[fullInfoSubflowInfoPtr:], uint64(uintptr(unsafe.Pointer(&sf[0]))))
	ne.PutUint64(hdr[fullInfoTCPInfoPtr:], uint64(uintptr(unsafe.Pointer(&tcp[0]))))
	optlen := uint32(len(hdr))
	var errno syscall.Errno
	err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, solMPTCP, mptcpFullInfo,
			uintptr(unsafe.Pointer(&hdr[0])), uintptr(unsafe.Pointer(&optlen)), 0)
	})
	runtime.KeepAlive(sf)
	runtime.KeepAlive(tcp)
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return nil, 0, fmt.Errorf("mptcp: getsockopt MPTCP_FULL_INFO: %w", err)
	}
	fi, total, err := parseFullInfo(hdr[:min(int(optlen), len(hdr))], sf, tcp)
	return fi, total, err
}

// parseFullInfo decodes a filled struct mptcp_full_info and the two
// arrays it pointed to. It returns the connection's subflow count, which
// may exceed what the arrays hold.
func parseFullInfo(hdr, sf, tcp []byte) (*FullInfo, int, error) {
	const msg = "MPTCP_FULL_INFO"
	if len(hdr) < fullInfoMPTCPInfo {
		return nil, 0, &ParseError{Msg: msg, Field: "header", Err: ErrTruncated}
	}
	ne := binary.NativeEndian
	tcpSize := int(ne.Uint32(hdr[fullInfoSizeTCPInfoUser:]))
	sfSize := int(ne.Uint32(hdr[fullInfoSizeSfInfoUser:]))
	total := int(ne.Uint32(hdr[fullInfoNumSubflows:]))
	room := int(ne.Uint32(hdr[fullInfoSizeArraysUser:]))
	if tcpSize > offerTCPInfo || sfSize > offerSfInfo {
		return nil, 0, &ParseError{Msg: msg, Field: "sizes", Err: ErrBadValue}
	}
	fi := &FullInfo{Info: ParseInfo(hdr[fullInfoMPTCPInfo:])}
	filled := min(total, room)
	if filled*offerSfInfo > len(sf) || filled*offerTCPInfo > len(tcp) {
		return nil, 0, &ParseError{Msg: msg, Field: "num_subflows", Err: ErrBadValue}
	}
	for i := range filled {
		// The kernel packs the arrays with the sizes it wrote back.
		s := sf[i*sfSize : (i+1)*sfSize]
		info := SubflowInfo{TCP: ParseTCPInfo(tcp[i*tcpSize : (i+1)*tcpSize])}
		if len(s) >= 4 {
			info.ID = uint8(ne.Uint32(s))
		}
		if len(s) >= 8+2*sockaddrStorageSize {
			info.Local = parseSockaddr(s[8 : 8+sockaddrStorageSize])
			info.Remote = parseSockaddr(s[8+sockaddrStorageSize : 8+2*sockaddrStorageSize])
		}
		fi.Subflows = append(fi.Subflows, info)
	}
	return fi, total, nil
}

// sockaddrStorageSize is sizeof(struct __kernel_sockaddr_storage).
const sockaddrStorageSize = 128

// parseSockaddr reads a struct sockaddr_in or sockaddr_in6 (family in
// host order, port and address in network order).
func parseSockaddr(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	port := func() uint16 { return binary.BigEndian.Uint16(b[2:4]) }
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrPortFrom(addrFrom(b[4:8]), port())
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(addrFrom(b[8:24]), port())
		}
	}
	return netip.AddrPort{}
}
