// Package ethtool reads and sets a network device's offloads, as
// `ethtool -k` and `ethtool -K` do, with the kernel's legacy ethtool
// requests on a socket: of the calling thread's network namespace for
// Get and Set, of the namespace it was opened in for a Handle.
package ethtool

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offload is one of the offload settings, with the requests that read
// and set it.
type Offload struct {
	name     string
	get, set uint32
}

// The offloads, named as `ethtool -k` names them. TxChecksum covers every
// transmit checksum feature; without it the kernel completes checksums
// and segments GSO packets itself before the device, and turns TSO off.
var (
	TxChecksum = Offload{"tx-checksumming", unix.ETHTOOL_GTXCSUM, unix.ETHTOOL_STXCSUM}
	TSO        = Offload{"tcp-segmentation-offload", unix.ETHTOOL_GTSO, unix.ETHTOOL_STSO}
	GSO        = Offload{"generic-segmentation-offload", unix.ETHTOOL_GGSO, unix.ETHTOOL_SGSO}
	GRO        = Offload{"generic-receive-offload", unix.ETHTOOL_GGRO, unix.ETHTOOL_SGRO}
)

func (o Offload) String() string { return o.name }

// Handle sends requests about the devices of the network namespace it
// was opened in, from any thread.
type Handle struct {
	fd int
}

// Open returns a Handle for the calling thread's network namespace.
func Open() (*Handle, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("ethtool: open socket: %w", err)
	}
	return &Handle{fd: fd}, nil
}

// Close releases the handle.
func (h *Handle) Close() error { return unix.Close(h.fd) }

// Get reads whether o is on for iface, in the calling thread's namespace.
func Get(iface string, o Offload) (bool, error) {
	h, err := Open()
	if err != nil {
		return false, err
	}
	defer h.Close()
	return h.Get(iface, o)
}

// Set turns o on or off for iface, in the calling thread's namespace (see
// Handle.Set).
func Set(iface string, o Offload, on bool) error {
	h, err := Open()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Set(iface, o, on)
}

// Get reads whether o is on for iface.
func (h *Handle) Get(iface string, o Offload) (bool, error) {
	v, err := h.request(iface, o.get, 0)
	if err != nil {
		return false, fmt.Errorf("read %s of %s: %w", o, iface, err)
	}
	return v != 0, nil
}

// Set turns o on or off for iface and reads it back: the kernel may leave
// a feature as it was without an error (one the device cannot change),
// which is an error here.
func (h *Handle) Set(iface string, o Offload, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if _, err := h.request(iface, o.set, v); err != nil {
		return fmt.Errorf("set %s of %s: %w", o, iface, err)
	}
	got, err := h.Get(iface, o)
	if err != nil {
		return err
	}
	if got != on {
		return fmt.Errorf("set %s of %s to %v: the kernel left it %v", o, iface, on, got)
	}
	return nil
}

// value is struct ethtool_value of <linux/ethtool.h>.
type value struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with its ifr_data member: the name, then a
// pointer to the ethtool request, padded to the size of the union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// request sends one ETHTOOL_G*/S* value request about iface.
func (h *Handle) request(iface string, cmd, data uint32) (uint32, error) {
	if len(iface) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", iface)
	}
	v := value{cmd: cmd, data: data}
	var req ifreqData
	copy(req.name[:], iface)
	req.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(h.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(&v)
	if errno != 0 {
		return 0, errno
	}
	return v.data, nil
}
