// Package buildinfo says which build of amptcp is running.
package buildinfo

import (
	"fmt"
	"runtime"
)

// Version is set at link time by the Makefile
// (-X github.com/amptcp/amptcp/internal/buildinfo.Version=...).
var Version = "dev"

// String is the one-line version report of a command.
func String(command string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", command, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
