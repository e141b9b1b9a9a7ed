package cc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/bpffs"
)

// PinDir is where Install pins a registration (NAME/link) and its maps.
const PinDir = "/sys/fs/bpf/amptcp/cc"

// ErrNotInstalled is the error of Uninstall for a name Install did not pin.
var ErrNotInstalled = errors.New("not installed by amptcp cc load")

func pinPath(name, file string) string { return filepath.Join(PinDir, name, file) }

func installed(name string) bool {
	_, err := os.Stat(pinPath(name, "link"))
	return err == nil
}

// Install registers name until Uninstall, beyond the life of the calling
// process, by pinning its link in the BPF file system (mounted at
// /sys/fs/bpf if it is not). If name is installed already, this build's
// programs replace the installed ones in one step (BPF_LINK_UPDATE): new
// sockets get them, running ones keep theirs until they close, and the
// connections' map carries over, so that old and new subflows of a
// connection stay coupled. replaced says which happened.
func Install(name string) (replaced bool, err error) {
	if !Is(name) {
		return false, fmt.Errorf("cc: %q: %w", name, ErrUnknown)
	}
	if err := bpffs.Prepare(PinDir); err != nil {
		return false, fmt.Errorf("cc: %w", err)
	}
	dir := filepath.Join(PinDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("cc: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(dir) // only if empty: nothing of an install left half-made
		}
	}()
	old, err := link.LoadPinnedLink(pinPath(name, "link"), nil)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("cc: open the installed %s: %w", name, err)
	}
	if old != nil {
		defer old.Close()
		return true, replace(name, old)
	}
	r, err := load(name, nil)
	if err != nil {
		return false, err
	}
	defer r.coll.Close()
	if err := r.register(); err != nil {
		return false, err
	}
	defer r.link.Close() // the pin holds it from here
	if err := r.link.Pin(pinPath(name, "link")); err != nil {
		return false, fmt.Errorf("cc: pin %s: %w", name, err)
	}
	return false, pinMaps(name, r)
}

// replace loads name again, over the installed link old, keeping the
// pinned maps when they still fit this build's.
func replace(name string, old link.Link) error {
	keep := map[string]*ebpf.Map{}
	for key, file := range map[string]string{"amp_conns": "conns", "amp_counters": "counters"} {
		if m, err := ebpf.LoadPinnedMap(pinPath(name, file), nil); err == nil {
			defer m.Close()
			keep[key] = m
		}
	}
	r, err := load(name, keep)
	if err != nil {
		// An older layout: start the new version with fresh maps (its
		// connections are coupled from their next subflow on).
		if r, err = load(name, nil); err != nil {
			return err
		}
	}
	defer r.coll.Close()
	fd, ok := old.(interface{ FD() int })
	if !ok {
		return fmt.Errorf("cc: the installed %s is not a BPF link", name)
	}
	if err := updateLink(fd.FD(), r.coll.Maps[name].FD()); err != nil {
		return fmt.Errorf("cc: replace %s: %w", name, err)
	}
	return pinMaps(name, r)
}

// pinMaps pins r's connections and counters maps under name, replacing
// the pins of maps r did not take over.
func pinMaps(name string, r *Registration) error {
	for _, p := range []struct {
		file string
		m    *ebpf.Map
	}{{"conns", r.conns}, {"counters", r.counters}} {
		path := pinPath(name, p.file)
		if p.m.IsPinned() {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cc: %w", err)
		}
		if err := p.m.Pin(path); err != nil {
			return fmt.Errorf("cc: pin the %s map of %s: %w", p.file, name, err)
		}
	}
	return nil
}

// Uninstall removes what Install pinned. The control is unregistered
// unless another process also holds a registration of it (amptcp pm or a
// lab run that loaded it themselves); still says so. Connections that use
// it go on with their programs, which the kernel frees when the last of
// their sockets closes.
func Uninstall(name string) (still bool, err error) {
	if !Is(name) {
		return false, fmt.Errorf("cc: %q: %w", name, ErrUnknown)
	}
	if !installed(name) {
		return false, fmt.Errorf("cc: %s: %w", name, ErrNotInstalled)
	}
	if err := os.RemoveAll(filepath.Join(PinDir, name)); err != nil {
		return false, fmt.Errorf("cc: uninstall %s: %w", name, err)
	}
	return stillRegistered(name)
}

// stillRegistered says whether name is registered a second after its last
// link went: the kernel releases a link from a work queue, and the name
// stays listed until then.
func stillRegistered(name string) (bool, error) {
	for end := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		avail, err := Available()
		if err != nil {
			return false, err
		}
		if !slices.Contains(avail, name) || time.Now().After(end) {
			return slices.Contains(avail, name), nil
		}
	}
}

// Use makes name registered for as long as the caller needs it: when it
// is registered already (installed, or held by another process), release
// does nothing; otherwise Use loads it, and release unregisters it. This
// is how amptcp pm and the lab take the controls their configurations
// name.
func Use(name string) (release func() error, err error) {
	nop := func() error { return nil }
	avail, err := Available()
	if err != nil {
		return nil, err
	}
	if slices.Contains(avail, name) {
		return nop, nil
	}
	r, err := Load(name)
	if errors.Is(err, ErrRegistered) {
		return nop, nil // another process registered it meanwhile
	}
	if err != nil {
		return nil, err
	}
	return r.Close, nil
}

// updateLink swaps the struct_ops map behind a link (BPF_LINK_UPDATE with
// new_map_fd), which cilium/ebpf offers only for programs. The kernel
// accepts a map of the same struct_ops type whose control has the same
// name, and swaps them under the lock of its list of controls.
func updateLink(linkFD, mapFD int) error {
	const bpfLinkUpdate = 29
	attr := struct{ linkFD, newMapFD, flags, oldMapFD uint32 }{uint32(linkFD), uint32(mapFD), 0, 0}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkUpdate, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return errno
	}
	return nil
}
