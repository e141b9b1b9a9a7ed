package pm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/internal/testenv"
)

// congestion: the path manager loads the control, makes it the
// namespace's default so that the connections' subflows run it, and on
// exit restores the default and unregisters what it loaded.
func TestCongestionOnTheKernel(t *testing.T) {
	testenv.RequireRoot(t)
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	testenv.Require(t, err == nil, "needs kernel BTF for BPF struct_ops")
	testenv.ExclusiveCongestionControls(t)
	if avail, _ := cc.Available(); slices.Contains(avail, cc.BALIA) {
		t.Fatalf("%s is registered on this machine already: the test could not see the path manager load it", cc.BALIA)
	}
	tl := newTwoLinks(t)
	setLimits(t, tl.cli, 2)
	setLimits(t, tl.srv, 2)
	defaultCC := func() string {
		var s string
		if err := tl.cli.Do(func() (err error) { s, err = readSysctl(defaultCCFile); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	tl.cli.SetSysctl("net.ipv4.tcp_congestion_control", "reno")
	cfg, err := Parse([]byte("policy: ndiffports\nsubflows: 2\ncongestion: {algorithm: balia}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Socket = filepath.Join(t.TempDir(), "pm.sock")
	d, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.cli.Do(func() error { return d.Run(ctx) }) }()
	defer func() {
		cancel()
		<-done
	}()
	for end := time.Now().Add(5 * time.Second); defaultCC() != cc.BALIA; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the namespace's congestion control is %q with the path manager running, want %s", defaultCC(), cc.BALIA)
		}
	}
	tr := startTransfer(t, tl)
	token := waitSubflows(t, tl.cli, tr.local(), 2)[0].Token
	var coupled int
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		tr.write(t, 64<<10)
		st, _ := cc.ReadStatus()
		for _, k := range st.Controls {
			for _, c := range k.Connections {
				if k.Name == cc.BALIA && c.Token == token {
					coupled = len(c.Subflows)
				}
			}
		}
		if coupled == 2 {
			break
		}
	}
	if coupled != 2 {
		t.Errorf("the connection has %d subflows coupled by %s, want 2", coupled, cc.BALIA)
	}
	tr.finish(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the deferred wait
	if got := defaultCC(); got != "reno" {
		t.Errorf("the namespace's congestion control is %q after the path manager stopped, want reno back", got)
	}
	if avail, _ := cc.Available(); slices.Contains(avail, cc.BALIA) {
		t.Errorf("%s still registered after the path manager that loaded it stopped: %s", cc.BALIA, strings.Join(avail, " "))
	}
}
