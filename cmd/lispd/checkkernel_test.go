package main

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/doctor"
	"github.com/amptcp/amptcp/internal/doctor/doctortest"
)

// TestCheckKernel: -check-kernel checks the data plane's needs for the
// router roles, and nothing for the mapping system's.
func TestCheckKernel(t *testing.T) {
	m := doctortest.Healthy()
	t.Cleanup(func() { kernelSystem = doctor.Host })
	kernelSystem = m.System
	rtr := writeConfig(t, "roles: [rtr]\ndataplane: {rloc-interfaces: [eth0]}\nmap-cache: {map-resolvers: [10.0.100.2]}\n")
	ms := writeConfig(t, "roles: [map-server]\nmap-server: {sites: [{name: a, keys: [{id: 0, secret: x}], eid-prefixes: [{prefix: 10.0.0.0/8}]}]}\n")

	if code, out, errOut := runLispd(context.Background(), "-config", rtr, "-check-kernel"); code != 0 ||
		!strings.Contains(out, "OK       tcx ") || !strings.Contains(out, "Everything is here.") {
		t.Errorf("-check-kernel, rtr, healthy = %d, %q, %q", code, out, errOut)
	}
	m.Probes["tcx"] = unix.EINVAL
	if code, out, _ := runLispd(context.Background(), "-config", rtr, "-check-kernel"); code != 1 ||
		!strings.Contains(out, "MISSING  tcx         attach a tc program with TCX: invalid argument") ||
		!strings.Contains(out, "fix: use Linux 6.6 or later") {
		t.Errorf("-check-kernel, rtr, no TCX = %d, %q", code, out)
	}
	if code, out, _ := runLispd(context.Background(), "-config", ms, "-check-kernel"); code != 0 ||
		out != "roles [map-server] need nothing special of the kernel\n" {
		t.Errorf("-check-kernel, map-server, no TCX = %d, %q", code, out)
	}
}
