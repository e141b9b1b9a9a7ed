package bpffs

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/osthread"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestCheckNamesTheMissingMount(t *testing.T) {
	err := Check(filepath.Join(t.TempDir(), "x", "y"))
	if err == nil || !strings.Contains(err.Error(), "mount -t bpf") {
		t.Errorf("a directory on no BPF file system: %v", err)
	}
}

// On a machine that boots without a BPF file system at /sys/fs/bpf,
// Prepare mounts one, so that a default pin path works; a path elsewhere
// is left for the operator. The machine's own mounts stay as they are:
// the test runs in a mount namespace of its own, with /sys/fs/bpf hidden
// under an empty tmpfs.
func TestPrepareMountsTheRoot(t *testing.T) {
	testenv.RequireRoot(t)
	errs := make(chan error, 1)
	var elsewhere, pins error
	osthread.Go(func() {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errs <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errs <- err
			return
		}
		if err := unix.Mount("tmpfs", Root, "tmpfs", 0, ""); err != nil {
			errs <- err
			return
		}
		if Check(Root) == nil {
			errs <- errorString("a tmpfs at " + Root + " passes for a BPF file system")
			return
		}
		elsewhere = Prepare("/run/amptcp-bpffs-test/pins")
		pins = Prepare(filepath.Join(Root, "amptcp", "lispd-test"))
		errs <- nil
	})
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if elsewhere == nil {
		t.Error("Prepare accepted a path outside " + Root + " on no BPF file system")
	}
	if pins != nil {
		t.Errorf("Prepare under %s with none mounted: %v", Root, pins)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
