package testenv

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/amptcp/amptcp/internal/netns"
)

var nsCounter atomic.Int64

// NetNS creates a network namespace named with this run's Prefix and
// removes it when t ends. It needs root.
func NetNS(t testing.TB) *netns.NS {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("%s-%d", Prefix, nsCounter.Add(1))
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// Main runs the tests of a package and then checks that they left no
// namespace, and no link in the root namespace, named with this run's
// prefix; it removes any it finds and fails the run.
// Use it as the body of TestMain.
func Main(m *testing.M) {
	code := m.Run()
	leaked, err := netns.List(Prefix + "-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: list namespaces: %v\n", err)
		code = 1
	}
	for _, name := range leaked {
		fmt.Fprintf(os.Stderr, "testenv: namespace %s leaked; removing it\n", name)
		if err := netns.Delete(name); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
		code = 1
	}
	if os.Geteuid() == 0 { // listing links needs no root, but only root tests create them
		links, err := netns.Links(Prefix + "-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			code = 1
		}
		for _, name := range links {
			fmt.Fprintf(os.Stderr, "testenv: link %s leaked into the root namespace; removing it\n", name)
			if err := netns.DeleteLink(name); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			}
			code = 1
		}
	}
	os.Exit(code)
}
