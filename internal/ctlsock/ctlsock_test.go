package ctlsock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func serve(t *testing.T, path string) {
	t.Helper()
	ln, err := Listen(path, "testd")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go Serve(ctx, ln, slog.New(slog.DiscardHandler), func(cmd string) (any, error) {
		if cmd == "status" {
			return map[string]int{"connections": 3}, nil
		}
		return nil, errors.New("unknown command")
	})
}

// A query gets the answer under its command's name, or the error.
func TestQuery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	serve(t, path)
	var st struct{ Connections int }
	if err := Query(path, "testd", "status", &st); err != nil || st.Connections != 3 {
		t.Errorf("status %+v, %v", st, err)
	}
	if err := Query(path, "testd", "memory", &st); err == nil || err.Error() != "unknown command" {
		t.Errorf("unknown command: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, %v; want 0600", fi.Mode(), err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("status\n"))
	b := make([]byte, 200)
	n, _ := c.Read(b)
	c.Close()
	if !strings.Contains(string(b[:n]), `"error":"request is not JSON`) {
		t.Errorf("answer to a request that is not JSON: %s", b[:n])
	}
}

// A socket that answers is not taken over; a stale one is replaced.
func TestListenStaleAndRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	serve(t, path)
	if _, err := Listen(path, "testd"); err == nil || !strings.Contains(err.Error(), "another testd is running") {
		t.Errorf("second Listen: %v", err)
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(stale, "testd")
	if err != nil {
		t.Fatalf("Listen over a stale file: %v", err)
	}
	ln.Close()
	if err := Query(filepath.Join(t.TempDir(), "none.sock"), "testd", "status", nil); err == nil || !strings.Contains(err.Error(), "is testd running?") {
		t.Errorf("query without a daemon: %v", err)
	}
}
