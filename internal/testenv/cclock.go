package testenv

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// congestionLock is the file whose lock tests take while they register
// amptcp's congestion controls.
const congestionLock = "/run/amptcp-test-congestion.lock"

// ExclusiveCongestionControls holds, until t ends, a machine-wide lock
// for tests that register amptcp's congestion controls (amp_lia, ...).
// The kernel's controls are named once for the whole machine, and `go
// test ./...` runs packages at once: without the lock, one test's
// unregistering of a control would pull it from under another package's
// test that found it registered and used it. It waits for the lock.
func ExclusiveCongestionControls(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	f, err := os.OpenFile(congestionLock, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatalf("open the congestion controls' test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", congestionLock, err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
}
