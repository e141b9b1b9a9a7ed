package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/daemon"
)

// Profiles are refused unless lispd was started with a directory for
// them; with one, a profile leaves its files there, one at a time.
func TestProfiles(t *testing.T) {
	_, sock := startDaemon(t, "")
	if _, err := daemon.StartProfile(sock); err == nil || !strings.Contains(err.Error(), "profiles are off") {
		t.Errorf("profile without a directory: %v", err)
	}

	dir := t.TempDir()
	_, sock = startDaemon(t, "", daemon.WithProfiles(dir))
	if _, err := daemon.StopProfile(sock); err == nil || !strings.Contains(err.Error(), "no profile is running") {
		t.Errorf("stop before start: %v", err)
	}
	started, err := daemon.StartProfile(sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.StartProfile(sock); err == nil || !strings.Contains(err.Error(), "running already") {
		t.Errorf("second start: %v", err)
	}
	stopped, err := daemon.StopProfile(sock)
	if err != nil {
		t.Fatal(err)
	}
	if *started != *stopped {
		t.Errorf("started %+v, stopped %+v", started, stopped)
	}
	for _, f := range []string{stopped.CPU, stopped.Trace, stopped.AllocsBefore, stopped.Allocs} {
		if filepath.Dir(f) != dir {
			t.Errorf("%s is not in %s", f, dir)
		}
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	again, err := daemon.StartProfile(sock)
	if err != nil {
		t.Fatal(err)
	}
	if again.CPU == started.CPU {
		t.Errorf("the second profile overwrites the first: %s", again.CPU)
	}
	if _, err := daemon.StopProfile(sock); err != nil {
		t.Fatal(err)
	}
}
