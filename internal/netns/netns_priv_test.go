package netns_test

import (
	"net"
	"os"
	"runtime"
	"slices"
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
