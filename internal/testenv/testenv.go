// Package testenv holds the helpers that decide whether a test can run on
// this machine, and that name what tests create so it can be cleaned up.
//
// Tests that need root, a kernel feature or an external tool call Require;
// it skips with the reason on a developer's machine and fails instead when
// AMPTCP_REQUIRE_PRIV=1 (CI sets it), so nothing skips silently in CI.
package testenv

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireEnv is the environment variable that turns skips into failures.
const RequireEnv = "AMPTCP_REQUIRE_PRIV"

// Strict reports whether every test must run (AMPTCP_REQUIRE_PRIV=1).
func Strict() bool { return os.Getenv(RequireEnv) == "1" }

// Require skips t with reason, or fails it when Strict, unless ok is true.
func Require(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if Strict() {
		t.Fatalf("%s (and %s=1 forbids skipping)", reason, RequireEnv)
		return
	}
	t.Skip(reason)
}

// LongEnv is the environment variable that runs the long tests: proofs
// that take minutes of emulated traffic each (make test-long sets it).
const LongEnv = "AMPTCP_LONG"

// RequireLong skips t unless AMPTCP_LONG=1: a proof of minutes that CI's
// run of the whole suite leaves out, and that make test-long runs. It is
// not a missing privilege, so it skips even when Strict.
func RequireLong(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(LongEnv) != "1" {
		t.Skipf("%s: a long test, run with %s=1 (make test-long)", what, LongEnv)
	}
}

// RequireRoot needs an effective user ID of 0, as namespaces, BPF and
// generic netlink commands do.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, os.Geteuid() == 0, "needs root (namespaces, BPF, netlink)")
}

// RequireTool needs an executable on PATH and returns its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	Require(t, err == nil, fmt.Sprintf("needs %s on PATH (make deps installs it)", name))
	return path
}

// Prefix is this test process's per-run prefix for the names of
// namespaces, links and files that tests create. It is short because Linux
// interface names have at most 15 bytes.
var Prefix = "at" + strconv.FormatInt(int64(os.Getpid())%(36*36*36*36), 36)

// RequireNFTables needs nft on PATH (make deps installs it) and a kernel
// with nf_tables, for an inet table that tracks connections, and returns
// nft's path. It reads the kernel's configuration from /proc/config.gz or
// /boot/config-RELEASE; when neither is there, it lets nft find out.
func RequireNFTables(t testing.TB) string {
	t.Helper()
	nft := RequireTool(t, "nft")
	if config, err := kernelConfig(); err == nil {
		missing := lacks(config, "CONFIG_NF_TABLES", "CONFIG_NF_TABLES_INET", "CONFIG_NFT_CT")
		Require(t, len(missing) == 0, fmt.Sprintf("the kernel has no nf_tables (%s not set in its configuration): "+
			"the firewall rules of deploy/nftables cannot be loaded", strings.Join(missing, ", ")))
	}
	return nft
}

// lacks returns the options of names that a kernel's configuration
// neither builds in nor as modules.
func lacks(config string, names ...string) []string {
	config = "\n" + config + "\n"
	var missing []string
	for _, name := range names {
		if !strings.Contains(config, "\n"+name+"=y\n") && !strings.Contains(config, "\n"+name+"=m\n") {
			missing = append(missing, name)
		}
	}
	return missing
}

// kernelConfig is the running kernel's configuration.
func kernelConfig() (string, error) {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(z)
		return string(b), err
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", err
	}
	b, err := os.ReadFile("/boot/config-" + unix.ByteSliceToString(uts.Release[:]))
	return string(b), err
}
