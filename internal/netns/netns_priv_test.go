package netns_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/osthread"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A namespace made for a test is isolated (only its own loopback exists,
// down) and is gone once the test's cleanup has run.
func TestNetNSIsolatedAndRemoved(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		ns := testenv.NetNS(t)
		name = ns.Name
		if _, err := os.Stat(ns.Path()); err != nil {
			t.Fatalf("namespace mount: %v", err)
		}
		// Stay on one thread to see that Do puts it back where it was.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before := threadNetNS(t)
		var ifaces []net.Interface
		err := ns.Do(func() (err error) {
			ifaces, err = net.Interfaces()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ifaces) != 1 || ifaces[0].Name != "lo" {
			t.Fatalf("interfaces in a new namespace = %v, want only lo", ifaces)
		}
		if after := threadNetNS(t); after != before {
			t.Fatalf("thread left in namespace %s after Do, was %s", after, before)
		}
	})
	names, err := netns.List(testenv.Prefix + "-")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, name) {
		t.Fatalf("namespace %s still exists after its test ended", name)
	}
}

func threadNetNS(t *testing.T) string {
	t.Helper()
	link, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return link
}

func TestDeleteIsIdempotent(t *testing.T) {
	testenv.RequireRoot(t)
	ns, err := netns.Create(testenv.Prefix + "-idem")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := ns.Delete(); err != nil {
			t.Fatalf("delete #%d: %v", i+1, err)
		}
	}
}

func TestRejectsPathNames(t *testing.T) {
	for _, name := range []string{"", "..", "a/b"} {
		if _, err := netns.Create(name); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
}

func TestLinksAndDeleteLink(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-lk"
	err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})
	if err != nil {
		t.Fatal(err)
	}
	links, err := netns.Links(testenv.Prefix + "-")
	if err != nil || !slices.Contains(links, name) {
		t.Fatalf("Links = %v, %v; want %s", links, err, name)
	}
	if err := netns.DeleteLink(name); err != nil {
		t.Fatal(err)
	}
	if links, _ := netns.Links(testenv.Prefix + "-"); slices.Contains(links, name) || slices.Contains(links, name+"p") {
		t.Fatalf("%v still there after DeleteLink", links)
	}
}

// WriteSysfs reaches a device that only the namespace's sysfs shows,
// and leaves no mount behind in the caller's mount namespace.
func TestSysfsOfNamespace(t *testing.T) {
	ns := testenv.NetNS(t)
	name := testenv.Prefix + "-sy"
	err := ns.Do(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The caller's thread and the main thread (which /proc/self shows)
	// keep their mounts and namespaces.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	state := func() string {
		return readFile(t, "/proc/thread-self/mountinfo") + readFile(t, "/proc/self/mountinfo") +
			link(t, "/proc/self/ns/net") + link(t, "/proc/self/ns/mnt") + link(t, "/proc/thread-self/ns/mnt")
	}
	before := state()
	rps := "class/net/" + name + "/queues/rx-0/rps_cpus"
	if err := ns.WriteSysfs(rps, "1"); err != nil {
		t.Fatal(err)
	}
	got, err := ns.ReadSysfs(rps)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimLeft(strings.TrimSpace(got), "0,") != "1" {
		t.Errorf("rps_cpus of %s = %q after writing 1", name, got)
	}
	if _, err := os.Stat("/sys/" + rps); !os.IsNotExist(err) {
		t.Errorf("the caller's /sys shows the namespace's device: %v", err)
	}
	for range 20 { // enough calls to land on the main thread
		if _, err := ns.ReadSysfs(rps); err != nil {
			t.Fatal(err)
		}
	}
	if after := state(); after != before {
		t.Errorf("mounts or namespaces changed:\n%s\nwere:\n%s", after, before)
	}
	if _, err := ns.ReadSysfs("class/net/" + name + "-none/mtu"); !os.IsNotExist(err) {
		t.Errorf("reading a device that does not exist: %v, want a not-exist error", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func link(t *testing.T, path string) string {
	t.Helper()
	l, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return l + "\n"
}

// A namespace made before another program's first `ip netns add` can be
// deleted after it: Create makes /run/netns a mount point of its own, so
// that iproute2 does not mount it over itself, over the namespaces below.
// The test runs in a mount namespace of its own, where /run/netns starts
// as a plain directory, as after a boot.
func TestDeleteAfterIPNetnsAdd(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-ipadd"
	errc := make(chan error, 1)
	osthread.Go(func() { errc <- inFreshMountNamespace(name) })
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(netns.Dir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left: %v", name, err)
	}
}

// inFreshMountNamespace, on a thread of its own, enters a private mount
// namespace where /run/netns is no mount point, creates the namespace
// name, makes /run/netns a mount point as `ip netns add` does, and
// deletes the namespace.
func inFreshMountNamespace(name string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// Nothing propagates out of here: undo what makes /run/netns a
	// mount point in this namespace.
	for unix.Unmount(netns.Dir, unix.MNT_DETACH) == nil {
	}
	ns, err := netns.Create(name)
	if err != nil {
		return err
	}
	// iproute2's netns_add: make the directory shared, and when it is no
	// mount point, bind-mount it on itself first.
	if err := unix.Mount("", netns.Dir, "none", unix.MS_SHARED|unix.MS_REC, ""); errors.Is(err, unix.EINVAL) {
		if err := unix.Mount(netns.Dir, netns.Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			ns.Delete()
			return fmt.Errorf("bind-mount as ip netns add does: %w", err)
		}
	}
	if err := ns.Delete(); err != nil {
		return fmt.Errorf("after ip netns add: %w", err)
	}
	return nil
}
