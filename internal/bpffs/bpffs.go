// Package bpffs finds and mounts the BPF file system that amptcp pins its
// programs, links and maps in, so that they outlive the process that
// loaded them.
package bpffs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is where the BPF file system is mounted by convention (systemd
// mounts it there at boot; a machine booted without systemd, or a
// container, may have none).
const Root = "/sys/fs/bpf"

// Check says why dir cannot hold pins: its nearest existing ancestor
// must be on a BPF file system. `ip netns exec` mounts a fresh /sys
// without one.
func Check(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if errors.Is(err, unix.ENOENT) && d != filepath.Dir(d) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Type != unix.BPF_FS_MAGIC {
			return fmt.Errorf("%s is not on a BPF file system (mount one: mount -t bpf bpf %s; `ip netns exec` hides the host's %s)",
				dir, d, Root)
		}
		return nil
	}
}

// Prepare makes dir ready to hold pins: when dir is under Root and no
// BPF file system is mounted there, it mounts one at Root, as cilium and
// bpftool do; a BPF file system anywhere else is the operator's to mount.
// It returns Check's error when dir is still on no BPF file system.
func Prepare(dir string) error {
	if under(dir, Root) && Check(Root) != nil {
		if err := os.MkdirAll(Root, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("bpf", Root, "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mount the BPF file system at %s: %w", Root, err)
		}
	}
	return Check(dir)
}

// under reports whether path is root or below it.
func under(path, root string) bool {
	path = filepath.Clean(path)
	return path == root || strings.HasPrefix(path, root+"/")
}
