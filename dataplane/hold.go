package dataplane

import (
	"bytes"
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

// The hold devices. With miss: hold, the ITR hands the packets it has no
// mapping for to lispd through a TAP device of lispd's own, lisphold<N>:
// what the ITR redirects to the device, lispd reads and holds while it
// resolves the mapping; what lispd writes to it enters the router as if
// received there, where the ITR runs again, on the entry lispd installed.
// An RTR does the same with the encapsulated packets it has no mapping
// for, through a device of its own whose ingress runs the underlay
// program.
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
	frame      []byte      // the virtio-net header and the Ethernet frame
	dev        *holdDevice // where it came from and goes back
}

// Len is the packet's length from its (outer) IP header on.
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

// holdDevice is a hold device, open.
type holdDevice struct {
	f       *os.File
	name    string
	ifindex int
	mac     net.HardwareAddr
	iid     uint32        // of the ITR's packets
	rtr     bool          // the RTR's: its packets are encapsulated
	lost    atomic.Uint64 // held packets dropped: lispd lagged
}

// openHoldDevice creates the device in the calling thread's network
// namespace, up, with the offloads on, forwarding on (the ITR's route
// look-ups for what lispd releases are made as if it came in there, and
// what it leaves to the kernel is forwarded from there), reverse-path
// filtering off (what lispd releases comes from the site's addresses),
// and no IPv6 link-local address (it is no link anyone is on). The
// device lives as long as its descriptor.
func openHoldDevice(iid uint32, rtr bool) (*holdDevice, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dataplane: hold device: open /dev/net/tun: %w", err)
	}
	h := &holdDevice{iid: iid, rtr: rtr}
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
		if len(frame) < ethHdrLen || bytes.Equal(frame[6:12], h.mac) {
			continue // the device's own, not the programs'
		}
		iid, eid, ok := h.iid, netip.Addr{}, false
		if h.rtr {
			iid, eid, ok = innerDestination(frame[ethHdrLen:], binary.BigEndian.Uint16(frame[12:]))
		} else {
			eid, ok = destination(frame[ethHdrLen:], binary.BigEndian.Uint16(frame[12:]))
		}
		if !ok {
			continue
		}
		select {
		case out <- Held{InstanceID: iid, EID: eid, frame: append([]byte(nil), buf[:n]...), dev: h}:
		default:
			h.lost.Add(1)
		}
	}
}

// destination is the destination address of an IP packet of the
// Ethernet type typ.
func destination(ip []byte, typ uint16) (netip.Addr, bool) {
	switch typ {
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

// innerDestination is the instance ID and the inner destination of a
// LISP packet (the RTR programs hand over only those).
func innerDestination(ip []byte, typ uint16) (uint32, netip.Addr, bool) {
	var n int
	switch {
	case typ == unix.ETH_P_IP && len(ip) >= 20:
		n = int(ip[0]&0x0f) * 4
	case typ == unix.ETH_P_IPV6:
		n = 40
	}
	if n == 0 || len(ip) < n+8+lispHdrLen+1 {
		return 0, netip.Addr{}, false
	}
	lisp := ip[n+8:]
	var iid uint32
	if lisp[0]&lispI != 0 {
		iid = binary.BigEndian.Uint32(lisp[4:]) >> 8
	}
	inner := lisp[lispHdrLen:]
	typ = unix.ETH_P_IP
	if inner[0]>>4 == 6 {
		typ = unix.ETH_P_IPV6
	}
	eid, ok := destination(inner, typ)
	return iid, eid, ok
}

// The LISP header's length, and its I bit.
const (
	lispHdrLen = 8
	lispI      = 0x08
)

// release writes packets back, in order, each to the device it came
// from: it enters the router there, and the program on the device's
// ingress forwards it before the write returns (a TAP device receives in
// the writer's context). The Ethernet destination becomes the device's
// address, so that the kernel takes what the programs leave to it.
func release(pkts []Held) error {
	var errs []error
	for _, p := range pkts {
		if p.dev == nil || len(p.frame) < vnetHdrLen+ethHdrLen {
			continue
		}
		copy(p.frame[vnetHdrLen:], p.dev.mac)
		if _, err := p.dev.f.Write(p.frame); err != nil {
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
