package buildinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProgram(t *testing.T) {
	dir := t.TempDir()
	given := filepath.Join(dir, "lispd")
	if err := os.WriteFile(given, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := Program("lispd", given, "--lispd"); err != nil || p != given {
		t.Errorf("Program with a path = %q, %v; want the path", p, err)
	}
	if _, err := Program("lispd", filepath.Join(dir, "gone"), "--lispd"); err == nil {
		t.Error("Program with a path that does not exist: no error")
	}
	t.Setenv("PATH", dir)
	if p, err := Program("lispd", "", "--lispd"); err != nil || p != given {
		t.Errorf("Program from $PATH = %q, %v; want %s", p, err, given)
	}
	if _, err := Program("no-such-program", "", "-bin"); err == nil || !strings.Contains(err.Error(), "give -bin") {
		t.Errorf("Program of nothing = %v; want an error naming -bin", err)
	}
}
