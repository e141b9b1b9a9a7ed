package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/doctor"
)

// kernelSystem is the machine -check-kernel looks at; tests put a fake
// in its place.
var kernelSystem = doctor.Host

// runCheckKernel is -check-kernel: the checks of the roles' needs (the
// data plane's, for xtr and rtr). Exit status 1 when one fails.
func runCheckKernel(roles []config.Role, stdout, stderr io.Writer) int {
	if !slices.Contains(roles, config.RoleXTR) && !slices.Contains(roles, config.RoleRTR) {
		fmt.Fprintf(stdout, "roles %v need nothing special of the kernel\n", roles)
		return 0
	}
	r := doctor.Run(kernelSystem(), doctor.Router())
	if err := doctor.WriteText(stdout, r); err != nil {
		fmt.Fprintf(stderr, "lispd: %v\n", err)
		return 1
	}
	if len(r.Missing()) > 0 {
		return 1
	}
	return 0
}
