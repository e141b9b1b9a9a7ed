package netns_test

import (
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/netns"
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
