package mptcp

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPathManagerFallback: a kernel without net.mptcp.path_manager (before
// 6.15) has net.mptcp.pm_type, 0 for kernel and 1 for userspace.
func TestPathManagerFallback(t *testing.T) {
	dir := t.TempDir()
	oldPM, oldType := pathManagerFile, pmTypeFile
	t.Cleanup(func() { pathManagerFile, pmTypeFile = oldPM, oldType })
	pathManagerFile = filepath.Join(dir, "path_manager") // absent
	pmTypeFile = filepath.Join(dir, "pm_type")
	if err := os.WriteFile(pmTypeFile, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pm, err := PathManager(); err != nil || pm != "kernel" {
		t.Fatalf("PathManager() = %q, %v; want kernel", pm, err)
	}
	if err := SetPathManager("userspace"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(pmTypeFile); string(b) != "1" {
		t.Fatalf("pm_type = %q after SetPathManager(userspace), want 1", b)
	}
	if pm, err := PathManager(); err != nil || pm != "userspace" {
		t.Fatalf("PathManager() = %q, %v; want userspace", pm, err)
	}
	if err := SetPathManager("bpf"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetPathManager(bpf) on pm_type: %v; want ErrInvalidArgument", err)
	}
	os.WriteFile(pmTypeFile, []byte("7"), 0o644)
	if _, err := PathManager(); err == nil {
		t.Fatal("PathManager() accepted pm_type 7")
	}
}
