package mptcp

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// The sysctls that choose the path manager. /proc/sys/net resolves against
// the network namespace of the thread that opens the file.
var (
	pathManagerFile = "/proc/sys/net/mptcp/path_manager" // Linux 6.15 and later
	pmTypeFile      = "/proc/sys/net/mptcp/pm_type"      // before: 0 kernel, 1 userspace
)

// The path managers of pm_type, by number.
var pmTypes = []string{"kernel", "userspace"}

// PathManager returns the path manager in use in the calling thread's
// network namespace: "kernel" or "userspace" (or another name a newer
// kernel offers), from net.mptcp.path_manager, or from net.mptcp.pm_type
// on kernels that have only that.
func PathManager() (string, error) {
	b, err := os.ReadFile(pathManagerFile)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("mptcp: read path manager: %w", err)
	}
	b, err = os.ReadFile(pmTypeFile)
	if err != nil {
		return "", fmt.Errorf("mptcp: read path manager: %w", err)
	}
	s := strings.TrimSpace(string(b))
	for i, name := range pmTypes {
		if s == fmt.Sprint(i) {
			return name, nil
		}
	}
	return "", fmt.Errorf("mptcp: read path manager: net.mptcp.pm_type is %q, want 0 or 1", s)
}

// SetPathManager chooses the path manager of the calling thread's network
// namespace for the connections created from now on ("kernel" or
// "userspace"). It needs CAP_NET_ADMIN.
func SetPathManager(name string) error {
	err := writeSysctl(pathManagerFile, name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mptcp: set path manager %q: %w (net.mptcp.available_path_managers lists the choices)", name, err)
	}
	for i, n := range pmTypes {
		if n == name {
			if err := writeSysctl(pmTypeFile, fmt.Sprint(i)); err != nil {
				return fmt.Errorf("mptcp: set path manager %q: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("mptcp: set path manager %q: %w: this kernel (net.mptcp.pm_type) knows only kernel and userspace", name, ErrInvalidArgument)
}

// writeSysctl writes a sysctl file that must exist (never creating one).
func writeSysctl(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
