package main

import (
	"net"
	"strings"
	"testing"
)

// TestLabRunLiveCannotListen: a live view whose address is taken fails
// `lab run` before any run starts, saying why.
func TestLabRunLiveCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	code, _, errOut := runCmd("", "lab", "run", "../../docs/scenarios/cloud-access.yaml", "-live", addr,
		"-o", t.TempDir(), "-dir", t.TempDir(), "-bin", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "amptcp lab run: live view: listen tcp "+addr+": bind: address already in use") {
		t.Errorf("lab run -live %s (taken) = %d, %q; want 1 and the listening error", addr, code, errOut)
	}
	if strings.Contains(errOut, "results in") {
		t.Errorf("lab run started the runs: %q", errOut)
	}
}
