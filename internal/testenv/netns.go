package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

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
		// A TCP socket closed with data unacknowledged would keep the
		// namespace alive for minutes after its name is gone.
		if _, err := ns.ResetTCP(); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("cleanup: %v", err)
		}
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// BPFFS mounts a BPF file system of the test's own in a temporary
// directory, for what a test pins (the host's /sys/fs/bpf may have none,
// and tests leave it alone), and unmounts it when t ends: what is still
// pinned there goes with it. It needs root.
func BPFFS(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatalf("mount a BPF file system: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// Main runs the tests of a package and then checks that they left no
// namespace, and no link in the root namespace, named with this run's
// prefix; it removes any it finds and fails the run.
// Use it as the body of TestMain.
func Main(m *testing.M) { os.Exit(run(m)) }

// MainWithBinaries is Main for packages whose tests run this
// repository's programs: it first builds the packages given (import
// paths of commands) into a temporary directory, which *dir names while
// the tests run, and removes it afterwards.
func MainWithBinaries(m *testing.M, dir *string, pkgs ...string) {
	tmp, err := os.MkdirTemp("", "amptcp-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", tmp}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		fmt.Fprintf(os.Stderr, "testenv: build %v: %v\n%s", pkgs, err, out)
		os.Exit(1)
	}
	*dir = tmp
	code := run(m)
	os.RemoveAll(tmp)
	os.Exit(code)
}

// run runs the tests and then checks that they left nothing behind.
func run(m *testing.M) int {
	code := m.Run()
	if removeLeaked("namespace %s leaked", netns.List, netns.Delete) {
		code = 1
	}
	// Listing links needs no root, but only root tests create them.
	if os.Geteuid() == 0 && removeLeaked("link %s leaked into the root namespace", netns.Links, netns.DeleteLink) {
		code = 1
	}
	return code
}

// removeLeaked lists what this run's tests left behind, removes it, and
// reports whether there was anything (or the listing failed).
func removeLeaked(what string, list func(prefix string) ([]string, error), remove func(name string) error) bool {
	names, err := list(Prefix + "-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return true
	}
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "testenv: "+what+"; removing it\n", name)
		if err := remove(name); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	return len(names) > 0
}
