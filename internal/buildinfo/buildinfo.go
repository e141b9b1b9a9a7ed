// Package buildinfo says which build of amptcp is running.
package buildinfo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Version is set at link time by the Makefile
// (-X github.com/amptcp/amptcp/internal/buildinfo.Version=...).
var Version = "dev"

// String is the one-line version report of a command.
func String(command string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", command, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Program finds another program of amptcp (lispd, amptcp) to run: the
// path given if any, else the one next to the running executable (where
// `make build` puts them together, in bin/), else the one in $PATH. flag
// names the option that gives the path, for the error.
func Program(name, given, flag string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", fmt.Errorf("find %s: %w", name, err)
		}
		return given, nil
	}
	self, _ := os.Executable()
	if self != "" {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find %s: not next to %s nor in $PATH (give %s)", name, self, flag)
	}
	return p, nil
}
