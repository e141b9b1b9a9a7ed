package udpbatch

import "golang.org/x/sys/unix"

func getsockname(fd int) (uint16, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	return uint16(sa.(*unix.SockaddrInet4).Port), nil
}
