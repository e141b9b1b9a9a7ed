// Package netns creates named network namespaces and runs code inside them.
//
// Namespaces are named like `ip netns add` names them (a bind mount under
// /run/netns), so `ip netns exec` and every other tool can enter them too.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/osthread"
)

// Dir is where named namespaces are bind-mounted, as iproute2 does.
const Dir = "/run/netns"

// NS is a named network namespace.
type NS struct {
	Name string
}

// Create makes a new named network namespace without entering it.
func Create(name string) (*NS, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := mountDir(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	// NewNamed switches the calling thread into the new namespace: switch
	// back before the thread is unlocked and reused by other goroutines.
	h, err := netns.NewNamed(name)
	if err != nil {
		netns.Set(orig)
		return nil, fmt.Errorf("create namespace %s: %w", name, err)
	}
	h.Close()
	if err := netns.Set(orig); err != nil {
		return nil, fmt.Errorf("return from namespace %s: %w", name, err)
	}
	return &NS{Name: name}, nil
}

// mountDir makes Dir a shared mount point of its own, as `ip netns add`
// does the first time it runs. Were it not one, the first `ip netns add`
// of another program would bind-mount Dir over itself, and the
// namespaces made before would lie below that mount: their files could
// be neither unmounted nor removed by their path ("device or resource
// busy").
func mountDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", Dir, err)
	}
	err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point yet
		return wrapMount(err)
	}
	if err := unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s on itself: %w", Dir, err)
	}
	return wrapMount(unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, ""))
}

func wrapMount(err error) error {
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", Dir, err)
	}
	return nil
}

// Path is the namespace's bind mount, usable with setns(2) or nsenter.
func (n *NS) Path() string { return filepath.Join(Dir, n.Name) }

// Do runs fn on a locked OS thread inside the namespace. Sockets fn opens
// stay in the namespace after Do returns; goroutines fn starts do not
// inherit it.
func (n *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	if err := n.enter(); err != nil {
		return err
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the wrong namespace: let it die with
		// the goroutine instead of returning it to the scheduler.
		runtime.Goexit()
	}
	return fnErr
}

// WriteSysfs writes value to the file rel under the namespace's /sys,
// such as "class/net/tap0/queues/rx-0/rps_cpus". Network devices show in
// a sysfs only in the namespace that mounted it, and some of their
// settings (receive steering) are nowhere but there: see inSysfs.
func (n *NS) WriteSysfs(rel, value string) error {
	return n.inSysfs(func(root string) error {
		return os.WriteFile(filepath.Join(root, rel), []byte(value), 0)
	})
}

// ReadSysfs reads the file rel under the namespace's /sys.
func (n *NS) ReadSysfs(rel string) (string, error) {
	var b []byte
	err := n.inSysfs(func(root string) (err error) {
		b, err = os.ReadFile(filepath.Join(root, rel))
		return err
	})
	return string(b), err
}

// inSysfs runs fn with a sysfs of the namespace mounted at root, as
// `ip netns exec` does: on a thread of its own that enters the namespace
// and a private mount namespace, mounts sysfs there and then ends, so
// that neither the mount nor the namespaces outlive the call or reach
// any other thread.
func (n *NS) inSysfs(fn func(root string) error) error {
	errc := make(chan error, 1)
	osthread.Go(func() { errc <- n.mountSysfs(fn) })
	return <-errc
}

// enter moves the calling thread, which is locked, into the namespace.
func (n *NS) enter() error {
	target, err := netns.GetFromName(n.Name)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", n.Name, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter namespace %s: %w", n.Name, err)
	}
	return nil
}

func (n *NS) mountSysfs(fn func(root string) error) error {
	if err := n.enter(); err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// Private first, so that the mount below never propagates back.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		return fmt.Errorf("mount sysfs of namespace %s: %w", n.Name, err)
	}
	return fn("/sys")
}

// Delete removes the namespace by name. Deleting one that does not exist
// is not an error, so Delete is safe to call twice.
func (n *NS) Delete() error { return Delete(n.Name) }

// Delete removes the named namespace, if it exists.
func Delete(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	path := filepath.Join(Dir, name)
	// EINVAL: the file is there but no longer a mount point (a crash
	// between mount and remove); remove it all the same.
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return nil
}

// List returns the names of the named namespaces that start with prefix.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("invalid namespace name %q", name)
	}
	return nil
}

// Links returns the names of the interfaces of the current namespace that
// start with prefix: veth ends a test left in the root namespace.
func Links(prefix string) ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var names []string
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names, nil
}

// DeleteLink removes an interface of the current namespace by name (with
// a veth, its peer goes too).
func DeleteLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find link %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}
