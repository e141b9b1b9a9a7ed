package dataplane

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offloads are the three offload settings a profile changes on a link's
// end, as `ethtool -k` names them: tcp-segmentation-offload (every TSO
// variant), generic-segmentation-offload and generic-receive-offload.
type Offloads struct {
	TSO bool `json:"tso"`
	GSO bool `json:"gso"`
	GRO bool `json:"gro"`
}

func (o Offloads) String() string {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	return fmt.Sprintf("tso %s, gso %s, gro %s", onOff(o.TSO), onOff(o.GSO), onOff(o.GRO))
}

// ethtoolValue is struct ethtool_value of <linux/ethtool.h>.
type ethtoolValue struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with its ifr_data member: the name, then a
// pointer to the ethtool request, padded to the size of the union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtool sends one legacy ETHTOOL_G*/S* value request about iface, on
// a socket of the calling thread's network namespace.
func ethtool(fd int, iface string, cmd, value uint32) (uint32, error) {
	if len(iface) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", iface)
	}
	v := ethtoolValue{cmd: cmd, data: value}
	var req ifreqData
	copy(req.name[:], iface)
	req.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(&v)
	if errno != 0 {
		return 0, errno
	}
	return v.data, nil
}

// getOffloads reads the offloads of iface in the calling thread's
// namespace.
func getOffloads(iface string) (Offloads, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Offloads{}, fmt.Errorf("read offloads of %s: %w", iface, err)
	}
	defer unix.Close(fd)
	var o Offloads
	for _, f := range []struct {
		cmd uint32
		to  *bool
	}{{unix.ETHTOOL_GTSO, &o.TSO}, {unix.ETHTOOL_GGSO, &o.GSO}, {unix.ETHTOOL_GGRO, &o.GRO}} {
		v, err := ethtool(fd, iface, f.cmd, 0)
		if err != nil {
			return Offloads{}, fmt.Errorf("read offloads of %s: %w", iface, err)
		}
		*f.to = v != 0
	}
	return o, nil
}

// setOffloads sets the offloads of iface in the calling thread's
// namespace and reads them back: the kernel may refuse a change without
// an error (a feature the device cannot turn on), which is an error here.
func setOffloads(iface string, want Offloads) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("set offloads of %s: %w", iface, err)
	}
	defer unix.Close(fd)
	b := func(v bool) uint32 {
		if v {
			return 1
		}
		return 0
	}
	for _, f := range []struct {
		cmd uint32
		v   bool
	}{{unix.ETHTOOL_STSO, want.TSO}, {unix.ETHTOOL_SGSO, want.GSO}, {unix.ETHTOOL_SGRO, want.GRO}} {
		if _, err := ethtool(fd, iface, f.cmd, b(f.v)); err != nil {
			return fmt.Errorf("set offloads of %s to %s: %w", iface, want, err)
		}
	}
	got, err := getOffloads(iface)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("set offloads of %s to %s: the kernel left %s", iface, want, got)
	}
	return nil
}
