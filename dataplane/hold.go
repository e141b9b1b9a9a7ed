package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The hold device. With miss: hold, the ITR hands the packets it has no
// mapping for to lispd through a TAP device of lispd's own, lisphold<N>:
// what the ITR redirects to the device, lispd reads and holds while it
// resolves the mapping; what lispd writes to it enters the router as if
// received there, where the ITR runs again, on the entry lispd installed.
// The device offers the offloads (a virtio-net header on each frame), so
// that GSO super-packets and unfinished checksums cross it as they are,
// both ways: nothing is segmented or checksummed twice, and a packet
// leaves the router as it would have without the detour. The device goes
// with lispd: held packets do not outlive it.

// Held is a packet the ITR handed to lispd to hold: to EID, in the
// instance.
type Held struct {
	InstanceID uint32
	EID        netip.Addr
	frame      []byte // the virtio-net header and the Ethernet frame
}

// Len is the packet's length from its IP header on.
func (h Held) Len() int { return max(0, len(h.frame)-vnetHdrLen-ethHdrLen) }

// HeldFrame makes a Held of a frame as the hold device gives it, for
// tests of what holds packets.
func HeldFrame(iid uint32, eid netip.Addr, n int) Held {
	return Held{InstanceID: iid, EID: eid, frame: make([]byte, vnetHdrLen+ethHdrLen+n)}
}

const (
	// vnetHdrLen is struct virtio_net_hdr's size, which the device puts
	// in front of each frame (IFF_VNET_HDR).
	vnetHdrLen = 10
	ethHdrLen  = 14
	// holdName is the device's name; the kernel numbers it.
	holdName = "lisphold%d"
	// holdMTU, the most a TAP device takes, lets GSO super-packets
	// through.
	holdMTU = 65535 - ethHdrLen
)

// holdDevice is the hold device, open.
type holdDevice struct {
	f       *os.File
	name    string
	ifindex int
	mac     net.HardwareAddr
	iid     uint32
	lost    atomic.Uint64 // held packets dropped: lispd lagged
}

// openHoldDevice creates the device in the calling thread's network
// namespace, up, with the offloads on, forwarding on (the ITR's route
// look-ups for what lispd releases are made as if it came in there, and
// what it leaves to the kernel is forwarded from there), reverse-path
// filtering off (what lispd releases comes from the site's addresses),
// and no IPv6 link-local address (it is no link anyone is on). The
// device lives as long as its descriptor.
func openHoldDevice(iid uint32) (*holdDevice, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dataplane: hold device: open /dev/net/tun: %w", err)
	}
	h := &holdDevice{iid: iid}
	if err := h.setUp(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dataplane: hold device: %w", err)
	}
	// Only now: the poller registers the descriptor with epoll, which
	// never hears from a tun descriptor that had no device then.
	h.f = os.NewFile(uintptr(fd), h.name)
	return h, nil
}

func (h *holdDevice) setUp(fd int) error {
	ifr, err := unix.NewIfreq(holdName)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	h.name = ifr.Name()
	offloads := unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads|unix.TUN_F_USO4|unix.TUN_F_USO6); err != nil {
		// Before Linux 6.2 there is no UDP segmentation offload on TAP
		// devices: the kernel segments such packets before the device.
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads); err != nil {
			return fmt.Errorf("offloads: %w", err)
		}
	}
	l, err := netlink.LinkByName(h.name)
	if err != nil {
		return err
	}
	h.ifindex, h.mac = l.Attrs().Index, l.Attrs().HardwareAddr
	for _, s := range []struct{ path, value string }{
		{"ipv4/conf/" + h.name + "/forwarding", "1"},
		{"ipv4/conf/" + h.name + "/rp_filter", "0"},
		{"ipv6/conf/" + h.name + "/forwarding", "1"},
		{"ipv6/conf/" + h.name + "/addr_gen_mode", "1"},
	} {
		err := os.WriteFile(filepath.Join("/proc/sys/net", s.path), []byte(s.value), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // a kernel without IPv6
			return err
		}
	}
	if err := netlink.LinkSetMTU(l, holdMTU); err != nil {
		return fmt.Errorf("set mtu: %w", err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

// read passes what the ITR hands over to out until the device is closed,
// dropping (and counting) what does not fit while lispd lags: the host
// sends it again.
func (h *holdDevice) read(out chan<- Held) error {
	buf := make([]byte, vnetHdrLen+holdMTU+ethHdrLen)
	for {
		n, err := h.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		frame := buf[vnetHdrLen:n]
		if len(frame) >= ethHdrLen && net.HardwareAddr(frame[6:12]).String() == h.mac.String() {
			continue // the device's own, not the ITR's
		}
		eid, ok := destination(frame)
		if !ok {
			continue
		}
		select {
		case out <- Held{InstanceID: h.iid, EID: eid, frame: append([]byte(nil), buf[:n]...)}:
		default:
			h.lost.Add(1)
		}
	}
}

// destination is the destination address of the IP packet in an
// Ethernet frame.
func destination(frame []byte) (netip.Addr, bool) {
	if len(frame) < ethHdrLen {
		return netip.Addr{}, false
	}
	ip := frame[ethHdrLen:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case unix.ETH_P_IP:
		if len(ip) >= 20 {
			return netip.AddrFrom4([4]byte(ip[16:20])), true
		}
	case unix.ETH_P_IPV6:
		if len(ip) >= 40 {
			return netip.AddrFrom16([16]byte(ip[24:40])), true
		}
	}
	return netip.Addr{}, false
}

// release writes packets back, in order: each enters the router through
// the device, whose ITR forwards it before the write returns (a TAP
// device receives in the writer's context). The Ethernet destination
// becomes the device's address, so that the kernel takes what the ITR
// leaves to it.
func (h *holdDevice) release(pkts []Held) error {
	var errs []error
	for _, p := range pkts {
		if len(p.frame) < vnetHdrLen+ethHdrLen {
			continue
		}
		copy(p.frame[vnetHdrLen:], h.mac)
		if _, err := h.f.Write(p.frame); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dataplane: release %d of %d held packets: %w", len(errs), len(pkts), errs[0])
	}
	return nil
}

func (h *holdDevice) close() error {
	if h == nil {
		return nil
	}
	return h.f.Close()
}
