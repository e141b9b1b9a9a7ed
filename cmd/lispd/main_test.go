package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
)

func runLispd(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := runLispd(context.Background(), "-version"); code != 0 || !strings.HasPrefix(out, "lispd ") {
		t.Errorf("-version = %d, %q", code, out)
	}
	if code, _, errOut := runLispd(context.Background(), "-h"); code != 0 || !strings.Contains(errOut, "usage: lispd") {
		t.Errorf("-h = %d, %q", code, errOut)
	}
	if code, _, errOut := runLispd(context.Background(), "extra"); code != 2 || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("extra argument = %d, %q", code, errOut)
	}
	if code, _, errOut := runLispd(context.Background(), "-cpus", "-1"); code != 2 || !strings.Contains(errOut, "-cpus -1: want a positive number") {
		t.Errorf("-cpus -1 = %d, %q", code, errOut)
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lispd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheck(t *testing.T) {
	good := writeConfig(t, "roles: [map-server]\nmap-server: {sites: [{name: a, keys: [{id: 0, secret: x}], eid-prefixes: [{prefix: 10.0.0.0/8}]}]}\n")
	if code, out, errOut := runLispd(context.Background(), "-config", good, "-check"); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("-check on a good file = %d, %q %q", code, out, errOut)
	}
	bad := writeConfig(t, "roles: [map-server]\nmap-server: {sites: [{name: a, eid-prefixes: [{prefix: 10.0.0.1/8}]}]}\n")
	code, _, errOut := runLispd(context.Background(), "-config", bad, "-check")
	for _, want := range []string{"map-server.sites[0].keys: missing", "map-server.sites[0].eid-prefixes[0].prefix: 10.0.0.1/8 has host bits set"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("-check on a bad file = %d, %q; want %q", code, errOut, want)
		}
	}
	if code, _, errOut := runLispd(context.Background(), "-config", "/nonexistent.yaml"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file = %d, %q", code, errOut)
	}
}

// lispd runs until its context ends, and lispd status shows it meanwhile.
func TestRunAndStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lispd.sock")
	cfg := writeConfig(t, `
roles: [map-server, map-resolver]
listen: ["127.0.0.1:0"]
control: {socket: `+sock+`}
map-server: {sites: [{name: site-a, keys: [{id: 0, secret: x}], eid-prefixes: [{prefix: 10.1.0.0/16}]}]}
`)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // -cpus sets it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		code, _, _ := runLispd(ctx, "-config", cfg, "-cpus", "3")
		done <- code
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := daemon.QueryStatus(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lispd did not start")
		}
	}
	code, out, errOut := runLispd(context.Background(), "status", "-socket", sock)
	if code != 0 || !strings.Contains(out, "site site-a (10.1.0.0/16): 0 registered") || !strings.Contains(out, "roles [map-server map-resolver]") ||
		!strings.Contains(out, "(3 loops each)") {
		t.Errorf("status = %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runLispd(context.Background(), "status", "-socket", sock, "-json"); code != 0 || !strings.Contains(out, `"map_server"`) {
		t.Errorf("status -json = %d, %q", code, out)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("lispd exited %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	if code, _, errOut := runLispd(context.Background(), "status", "-socket", sock); code != 1 || !strings.Contains(errOut, "is lispd running?") {
		t.Errorf("status without lispd = %d, %q", code, errOut)
	}
}

// lispd reload applies what changed and says what waits for a restart;
// lispd restart runs lispd again (here in the test process instead of
// the exec) and says what the new one adopted; lispd stop stops it, and
// says when there is nothing to stop.
func TestReloadRestartStop(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lispd.sock")
	text := `
roles: [map-server, map-resolver]
listen: ["127.0.0.1:0"]
control: {socket: ` + sock + `}
map-server: {sites: [{name: site-a, keys: [{id: 0, secret: x}], eid-prefixes: [{prefix: 10.1.0.0/16}]}]}
`
	cfg := writeConfig(t, text)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 2)
	start := func() {
		go func() {
			code, _, _ := runLispd(ctx, "-config", cfg)
			exited <- code
		}()
	}
	restarts := 0
	defer func(exec func() error) { reexec = exec }(reexec)
	reexec = func() error {
		restarts++
		start()
		return nil
	}
	start()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := daemon.QueryStatus(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lispd did not start")
		}
	}

	if code, out, errOut := runLispd(ctx, "reload", "-socket", sock); code != 0 || out != "lispd reloaded: applied nothing; waiting for a restart: nothing\n" {
		t.Errorf("reload = %d, %q %q", code, out, errOut)
	}
	if err := os.WriteFile(cfg, []byte(text+"log: {level: debug}\nmetrics: {listen: \"127.0.0.1:0\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runLispd(ctx, "reload", "-socket", sock); code != 0 ||
		out != "lispd reloaded: applied log.level; waiting for a restart: metrics.listen (lispd restart)\n" {
		t.Errorf("reload = %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runLispd(ctx, "status", "-socket", sock); code != 0 || !strings.Contains(out, "last reload") {
		t.Errorf("status after a reload = %d, %q", code, out)
	}

	code, out, errOut := runLispd(ctx, "restart", "-socket", sock)
	if code != 0 || restarts != 1 || !strings.Contains(out, "lispd restarted (pid ") || !strings.Contains(out, "no data plane") {
		t.Errorf("restart = %d, %q %q; %d restarts", code, out, errOut, restarts)
	}
	if code := <-exited; code != 0 {
		t.Errorf("the lispd that restarted exited %d", code)
	}

	if code, out, errOut := runLispd(ctx, "stop", "-config", cfg); code != 0 || !strings.Contains(out, "stopped for good") {
		t.Errorf("stop = %d, %q %q", code, out, errOut)
	}
	if code := <-exited; code != 0 {
		t.Errorf("the lispd stopped exited %d", code)
	}
	if code, out, errOut := runLispd(ctx, "stop", "-config", cfg); code != 0 || out != "no lispd answers at "+sock+"\n" {
		t.Errorf("stop without lispd = %d, %q %q", code, out, errOut)
	}
}
