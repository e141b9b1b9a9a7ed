package linkemu

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
)

// openTAP creates the TAP device of ep with the given MTU, up, and
// returns its non-blocking file descriptor. The device lives as long as
// the descriptor: closing it removes the device.
//
// The device is created inside its namespace, not created here and moved:
// tun(4) makes the device in the namespace of the thread that opened
// /dev/net/tun, so opening it from a thread inside ep's namespace means
// the device never exists anywhere else (no name clash with the caller's
// namespace, nothing to leak there if a move fails). The descriptor then
// works from any thread.
func openTAP(ep Endpoint, mtu int) (int, error) {
	fd := -1
	create := func() error {
		var err error
		fd, err = createTAP(ep.Name, mtu)
		return err
	}
	var err error
	if ep.Namespace == "" {
		err = create()
	} else {
		err = (&netns.NS{Name: ep.Namespace}).Do(create)
	}
	if err != nil {
		where := ep.Namespace
		if where == "" {
			where = "the current namespace"
		}
		return -1, fmt.Errorf("create tap %s in %s: %w", ep.Name, where, err)
	}
	return fd, nil
}

// createTAP runs in the device's namespace.
func createTAP(name string, mtu int) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		// IFF_NO_PI: frames without tun's 4-byte packet-information
		// header. No IFF_VNET_HDR, so the device offers no offloads and
		// the kernel hands it frames of at most the MTU, as a NIC's
		// wire would carry.
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = setUp(name, mtu)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// setUp sets the device's MTU and brings it up, with netlink sockets of
// the calling thread's namespace.
func setUp(name string, mtu int) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set mtu %d: %w", mtu, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}
