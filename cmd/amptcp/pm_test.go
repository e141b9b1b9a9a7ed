package main

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/ctlsock"
	"github.com/amptcp/amptcp/pm"
)

func TestPMCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("policy: ndiffports\nsubflows: 3\n"), 0o600)
	if code, out, errOut := runCmd("", "pm", "-check", "-config", good); code != 0 || !strings.Contains(out, "valid (policy ndiffports)") {
		t.Errorf("pm -check = %d, %q %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("policy: amptcp\nsubflows: 3\n"), 0o600)
	code, _, errOut := runCmd("", "pm", "-check", "-config", bad)
	if code != 1 || !strings.Contains(errOut, "amptcp.map-resolver: missing") || !strings.Contains(errOut, "subflows: only") {
		t.Errorf("pm -check of a bad file = %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("", "pm", "-config", good, "extra"); code != 2 || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("pm with an argument = %d, %q", code, errOut)
	}
}

// pm status prints what the path manager's control socket answers.
func TestPMStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "pm.sock")
	if code, _, errOut := runCmd("", "pm", "status", "-socket", sock); code != 1 || !strings.Contains(errOut, "is amptcp pm running?") {
		t.Errorf("pm status without a daemon = %d, %q", code, errOut)
	}
	ln, err := ctlsock.Listen(sock, "amptcp pm")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := pm.Status{Policy: pm.PolicyNdiffports, Connections: []pm.ConnStatus{{
		Token: 0xabc, Local: netip.MustParseAddrPort("10.1.0.1:40000"), Remote: netip.MustParseAddrPort("10.2.0.1:5201"),
		State: "open", Plan: &pm.Plan{Policy: pm.PolicyNdiffports, N: 2, Why: "ndiffports: 2 subflows on one address pair"},
		Subflows: []pm.SubflowStatus{{Slot: 1, Local: netip.MustParseAddrPort("10.1.0.1:41234"),
			Remote: netip.MustParseAddrPort("10.2.0.1:5201"), LocalID: 1, Path: -1, PathBack: -1, State: "up", BytesAcked: 99}},
	}}}
	go ctlsock.Serve(ctx, ln, slog.New(slog.DiscardHandler), func(cmd string) (any, error) {
		if cmd == "status" {
			return st, nil
		}
		return nil, errors.New("no")
	})
	code, out, errOut := runCmd("", "pm", "status", "-socket", sock)
	for _, want := range []string{"policy ndiffports, 1 connection", "connection 00000abc 10.1.0.1:40000 -> 10.2.0.1:5201 client open",
		"plan ndiffports: 2 subflows", "10.1.0.1:41234"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("pm status = %d, lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
	if code, out, _ := runCmd("", "pm", "status", "-json", "-socket", sock); code != 0 || !strings.Contains(out, `"token": 2748`) {
		t.Errorf("pm status -json = %d:\n%s", code, out)
	}
}
