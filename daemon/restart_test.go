package daemon_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/dataplane"
)

// fileDaemon runs lispd from a configuration file (yaml, {sock} standing
// for the control socket) until the test ends; wait waits for Run's
// result.
func fileDaemon(t *testing.T, yaml string, opts ...daemon.Option) (d *daemon.Daemon, path, sock string, wait func() error) {
	t.Helper()
	dir := t.TempDir()
	sock, path = filepath.Join(dir, "lispd.sock"), filepath.Join(dir, "lispd.yaml")
	writeFile(t, path, strings.ReplaceAll(yaml, "{sock}", sock))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err = daemon.New(cfg, nil, append(opts, daemon.WithConfigFile(path))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- d.Run(ctx) }()
	var once sync.Once
	var runErr error
	wait = func() error {
		once.Do(func() { runErr = <-res })
		return runErr
	}
	t.Cleanup(func() {
		cancel()
		wait()
	})
	waitFor(t, "the control socket", func() bool { _, err := daemon.QueryStatus(sock); return err == nil })
	return d, path, sock, wait
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A reload (SIGHUP, `lispd reload`) applies what changes in a running
// lispd, and names what waits for a restart; a file that does not load
// changes nothing. What waits is reported again at the next reload.
func TestReload(t *testing.T) {
	_, msSock := startDaemon(t, "")
	ms := (&running{sock: msSock}).status(t).Listen[0]
	dp := newFakeDP("127.0.0.1")
	level := new(slog.LevelVar)
	mapping := "    - {eid-prefix: 10.1.0.0/16, locators: [{address: 192.0.2.1}]}"
	yaml := xtrConfig("127.0.0.1:0", ms, mapping, "", false)
	_, path, sock, _ := fileDaemon(t, yaml, dp.option(), daemon.WithLogLevel(level))
	waitFor(t, "the registration", func() bool { return (&running{sock: sock}).status(t).XTR.MapServers[0].State == "registered" })

	changed := strings.NewReplacer(
		"dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}",
		"dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0], path-selection: port-sum}\nlog: {level: debug}",
		"map-cache: {map-resolvers: [\""+ms+"\"], request-timeout: 500ms, probe-interval: 0s}",
		"map-cache: {map-resolvers: [\""+ms+"\"], request-timeout: 700ms, probe-interval: 0s, static: [{eid-prefix: 10.9.0.0/16, locators: [{address: 192.0.2.9}]}]}",
		mapping, mapping+"\n    - {eid-prefix: 10.64.2.0/24, locators: [{address: 192.0.2.1}]}",
	).Replace(strings.ReplaceAll(yaml, "{sock}", sock))
	writeFile(t, path, changed)
	var r daemon.Reload
	if err := daemon.Ask(sock, "reload", &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Applied, []string{"log.level", "map-cache.request-timeout", "map-cache.static", "xtr.database-mappings"}) ||
		!slices.Equal(r.NeedsRestart, []string{"dataplane.path-selection"}) || r.Error != "" {
		t.Errorf("reload %+v", r)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after the reload", level.Level())
	}
	if e, _, ok := dp.entry("10.9.0.0/16"); !ok || len(e.Paths) != 1 {
		t.Errorf("static entry %+v, %v", e, ok)
	}
	if e, _, ok := dp.entry("10.64.2.0/24"); !ok || e.Action != dataplane.NativelyForward {
		t.Errorf("the site's new prefix %+v, %v", e, ok)
	}
	waitFor(t, "the new mapping registered", func() bool {
		st := (&running{sock: msSock}).status(t)
		return len(st.MapServer.Sites[0].Registrations) == 2
	})

	// The same file again: only what waits for a restart.
	r = daemon.Reload{}
	if err := daemon.Ask(sock, "reload", &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Applied) != 0 || !slices.Equal(r.NeedsRestart, []string{"dataplane.path-selection"}) {
		t.Errorf("second reload %+v", r)
	}
	// A file that does not load: nothing changes, and the status says so.
	writeFile(t, path, strings.Replace(changed, "level: debug", "level: loud", 1))
	r = daemon.Reload{}
	if err := daemon.Ask(sock, "reload", &r); err != nil {
		t.Fatal(err)
	}
	st := (&running{sock: sock}).status(t)
	if !strings.Contains(r.Error, "log.level") || st.LastReload == nil || st.LastReload.Error != r.Error || level.Level() != slog.LevelDebug {
		t.Errorf("reload of a broken file %+v, status %+v", r, st.LastReload)
	}
}

// `lispd restart` keeps the data plane for the next lispd (Run returns
// ErrRestart), unless it cannot be kept or the configuration does not
// load: then nothing happens. `lispd stop` detaches it.
func TestRestartAndStop(t *testing.T) {
	rtr := `
roles: [rtr]
listen: ["127.0.0.1:0"]
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], probe-interval: 0s}
`
	t.Run("restart", func(t *testing.T) {
		dp := newFakeDP("127.0.0.1")
		dp.pinned = "/sys/fs/bpf/amptcp/lispd-test"
		_, path, sock, wait := fileDaemon(t, rtr, dp.option())
		writeFile(t, path, "roles: [rtr]\nlisten: [nowhere]\n")
		var rs daemon.RestartStatus
		if err := daemon.Ask(sock, "restart", &rs); err == nil || !strings.Contains(err.Error(), "the configuration does not load") {
			t.Errorf("restart with a broken configuration: %v", err)
		}
		writeFile(t, path, strings.ReplaceAll(strings.Replace(rtr, "[eth0]", "[eth0], pin-path: /sys/fs/bpf/elsewhere", 1), "{sock}", sock))
		if err := daemon.Ask(sock, "restart", &rs); err == nil || !strings.Contains(err.Error(), "dataplane.pin-path changes") {
			t.Errorf("restart to another pin-path: %v", err)
		}
		writeFile(t, path, strings.ReplaceAll(strings.Replace(rtr, "[eth0]", "[eth0], pin-path: "+dp.pinned, 1), "{sock}", sock))
		if err := daemon.Ask(sock, "restart", &rs); err != nil || rs.PID != os.Getpid() || rs.Pinning.Path != dp.pinned {
			t.Fatalf("restart: %v %+v", err, rs)
		}
		if err := wait(); !errors.Is(err, daemon.ErrRestart) || !dp.kept {
			t.Errorf("Run returned %v, data plane kept %v", err, dp.kept)
		}
	})
	t.Run("without pinning", func(t *testing.T) {
		dp := newFakeDP("127.0.0.1")
		_, _, sock, _ := fileDaemon(t, rtr, dp.option())
		var rs daemon.RestartStatus
		if err := daemon.Ask(sock, "restart", &rs); err == nil || !strings.Contains(err.Error(), "the data plane cannot be kept: dataplane.pin-path is off") {
			t.Errorf("restart without pinning: %v", err)
		}
		if _, err := daemon.QueryStatus(sock); err != nil {
			t.Errorf("lispd stopped after a refused restart: %v", err)
		}
	})
	t.Run("stop", func(t *testing.T) {
		dp := newFakeDP("127.0.0.1")
		dp.pinned = "/sys/fs/bpf/amptcp/lispd-test"
		_, _, sock, wait := fileDaemon(t, strings.Replace(rtr, "rloc-interfaces: [eth0]", "rloc-interfaces: [eth0], keep-on-exit: true", 1), dp.option())
		var rs daemon.RestartStatus
		if err := daemon.Ask(sock, "stop", &rs); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil || dp.kept || !dp.closed {
			t.Errorf("Run returned %v; kept %v, closed %v", err, dp.kept, dp.closed)
		}
	})
	t.Run("keep-on-exit", func(t *testing.T) {
		dp := newFakeDP("127.0.0.1")
		dp.pinned = "/sys/fs/bpf/amptcp/lispd-test"
		t.Cleanup(func() { // after the daemon's cleanup, the signal's stand-in
			if !dp.kept {
				t.Error("the data plane was not kept at exit with keep-on-exit")
			}
		})
		fileDaemon(t, strings.Replace(rtr, "rloc-interfaces: [eth0]", "rloc-interfaces: [eth0], keep-on-exit: true", 1), dp.option())
	})
}

// The map-cache entries the data plane adopted are taken over by the
// control plane, which asks for each again.
func TestAdoptedMapCache(t *testing.T) {
	_, msSock := startDaemon(t, "")
	ms := (&running{sock: msSock}).status(t).Listen[0]
	dp := newFakeDP("127.0.0.1")
	dp.stored = []dataplane.StoredEntry{{Key: dataplane.Key{Prefix: netip.MustParsePrefix("10.64.9.0/24")}, Action: dataplane.Encapsulate, Paths: 2}}
	_, _, sock, _ := fileDaemon(t, xtrConfig("127.0.0.1:0", ms, "    - {eid-prefix: 10.1.0.0/16, locators: [{address: 192.0.2.1}]}", "", false), dp.option())
	// No ETR registered 10.64.9.0/24, in site a's 10.64.0.0/10: the
	// refresh's negative reply replaces the adopted entry.
	var mc []string
	waitFor(t, "the adopted entry to be asked for again", func() bool {
		mc = nil
		for _, e := range (&running{sock: sock}).status(t).MapCache {
			mc = append(mc, e.EIDPrefix+" "+e.Action+" from "+e.Source)
		}
		return slices.Contains(mc, "10.64.9.0/24 send-map-request from "+ms) || slices.ContainsFunc(mc, func(s string) bool {
			return strings.HasPrefix(s, "10.64.") && strings.HasSuffix(s, ms) && !strings.Contains(s, "adopted")
		})
	})
	if slices.ContainsFunc(mc, func(s string) bool { return strings.HasSuffix(s, "adopted") }) {
		t.Errorf("map-cache %v", mc)
	}
	if st := (&running{sock: sock}).status(t); st.Dataplane.Adoption == nil || st.Dataplane.Adoption.Entries != 1 {
		t.Errorf("adoption %+v", st.Dataplane.Adoption)
	}
}
