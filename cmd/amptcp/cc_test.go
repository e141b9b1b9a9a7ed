package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestCCArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: amptcp cc load"},
		{[]string{"load"}, 2, "no congestion control named"},
		{[]string{"load", "cubic"}, 2, `"cubic": not one of amptcp's congestion controls`},
		{[]string{"unload", "lia", "foo"}, 2, `"foo": not one of`},
		{[]string{"frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{[]string{"status", "extra"}, 2, `unexpected argument "extra"`},
	} {
		code, _, errOut := runCmd("", append([]string{"cc"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("amptcp cc %v = %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}
}

// load, status and unload as a user runs them.
func TestCCLoadStatusUnload(t *testing.T) {
	testenv.RequireRoot(t)
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	testenv.Require(t, err == nil, "needs kernel BTF for BPF struct_ops")
	testenv.ExclusiveCongestionControls(t)
	if _, err := os.Stat(cc.PinDir + "/" + cc.WVegas + "/link"); err == nil {
		t.Fatalf("%s is installed on this machine: the test would remove it", cc.WVegas)
	}
	t.Cleanup(func() { cc.Uninstall(cc.WVegas) })
	if code, out, errOut := runCmd("", "cc", "load", "wvegas"); code != 0 || out != "amp_wvegas: registered\n" {
		t.Fatalf("cc load wvegas = %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := runCmd("", "cc", "status")
	// The columns are as wide as the widest row, which another test's
	// lingering connections (a namespace's orphaned sockets) can widen.
	if code != 0 || !regexp.MustCompile(`(?m)^amp_wvegas +registered, installed\b`).MatchString(out) {
		t.Errorf("cc status = %d, %q, %q", code, out, errOut)
	}
	code, out, _ = runCmd("", "cc", "status", "-json")
	if code != 0 || !strings.Contains(out, `"name": "amp_wvegas",`) || !strings.Contains(out, `"installed": true`) {
		t.Errorf("cc status -json = %d, %q", code, out)
	}
	if code, out, _ := runCmd("", "cc", "load", "amp_wvegas"); code != 0 || !strings.Contains(out, "amp_wvegas: replaced") {
		t.Errorf("cc load again = %d, %q", code, out)
	}
	if code, out, _ := runCmd("", "cc", "unload", "wvegas"); code != 0 || !strings.Contains(out, "amp_wvegas: unregistered") {
		t.Errorf("cc unload = %d, %q", code, out)
	}
	if code, _, errOut := runCmd("", "cc", "unload", "wvegas"); code != 1 || !strings.Contains(errOut, "not loaded by amptcp cc load") {
		t.Errorf("cc unload again = %d, %q", code, errOut)
	}
}
