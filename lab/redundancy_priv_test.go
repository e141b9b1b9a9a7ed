package lab

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
)

// redundantTopology has four sites and two map-servers (each also a
// map-resolver), which every xTR registers with and asks in turn.
const redundantTopology = `
name: NAME
nodes:
  - {name: client, role: host}
  - {name: server, role: host}
  - {name: server3, role: host}
  - {name: server4, role: host}
  - {name: xtra, role: xtr, site: a}
  - {name: xtrb, role: xtr, site: b}
  - {name: xtrc, role: xtr, site: c}
  - {name: xtrd, role: xtr, site: d}
  - {name: core, role: router}
  - {name: ms1, role: ms}
  - {name: ms2, role: ms}
sites: [{name: a}, {name: b}, {name: c}, {name: d}]
links:
  - {ends: [client, xtra]}
  - {ends: [server, xtrb]}
  - {ends: [server3, xtrc]}
  - {ends: [server4, xtrd]}
  - {ends: [xtra, core]}
  - {ends: [xtrb, core]}
  - {ends: [xtrc, core]}
  - {ends: [xtrd, core]}
  - {ends: [core, ms1]}
  - {ends: [core, ms2]}
`

// TestMapServerFailover kills the first map-server and map-resolver
// (SIGKILL, as a crash) while a transfer runs between two sites: the
// transfer goes on, new flows to sites nobody resolved yet still resolve,
// through the second map-resolver, within the tries the configuration
// gives a Map-Request (request-timeout, request-retries), and once the
// first is known down the next new flow does not wait for it.
func TestMapServerFailover(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-ha"
	path := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(redundantTopology, "NAME", name, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	st, opts, top := upLab(t, name, path, nil)
	ns := func(node string) string { return st.Prefix + node }
	ctx := context.Background()
	if err := warmPair(ctx, ns("client"), ns("server"), netip.Addr{}, nextWarmPorts(), "10.2.0.2:5201"); err != nil {
		t.Fatal(err)
	}
	xtra := processOf(t, st, "xtra", "lispd")
	plan, err := topo.Compile(top, opts.dir(name))
	if err != nil {
		t.Fatal(err)
	}
	mc := plan.Node("xtra").Lispd.MapCache
	t.Logf("xtra asks %v, request-timeout %s, %d retries", mc.MapResolvers, mc.RequestTimeout, mc.RequestRetries)

	// Under traffic: a transfer from client to server while ms1 dies.
	transferred := make(chan error, 1)
	go func() { transferred <- transfer(ns("client"), ns("server"), "10.2.0.2:5202", 64<<20, false) }()
	time.Sleep(200 * time.Millisecond)
	ms1 := processOf(t, st, "ms1", "lispd")
	if err := syscall.Kill(ms1.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// A new flow to site c: xtra and xtrc each ask ms1 first, time out,
	// and ask ms2.
	before := cacheCounters(t, xtra)
	start := time.Now()
	if err := exchange(ctx, ns("client"), ns("server3"), &net.TCPAddr{}, "10.3.0.2:5201"); err != nil {
		t.Fatalf("new flow to site c after ms1 died: %v", err)
	}
	resolved := resolvedAfter(t, xtra, "10.3.0.0/24", start)
	after := cacheCounters(t, xtra)
	t.Logf("site c resolved %s after the first SYN (the configuration allows %s)", resolved,
		mc.RequestTimeout.Duration*time.Duration(1+mc.RequestRetries))
	if after.RequestsFailed != before.RequestsFailed {
		t.Errorf("Map-Requests failed: %d -> %d: the second map-resolver should answer within the tries",
			before.RequestsFailed, after.RequestsFailed)
	}
	st1 := lispdStatus(t, xtra)
	if len(st1.MapResolvers) != 2 || !st1.MapResolvers[0].Down || st1.MapResolvers[1].Down {
		t.Errorf("xtra's map-resolvers %+v, want the first down", st1.MapResolvers)
	}

	// Another new flow, to site d: ms1 is known down, no timeout.
	before = cacheCounters(t, xtra)
	if err := exchange(ctx, ns("client"), ns("server4"), &net.TCPAddr{}, "10.4.0.2:5201"); err != nil {
		t.Fatalf("new flow to site d: %v", err)
	}
	if after := cacheCounters(t, xtra); after.MapRequests != before.MapRequests+1 {
		t.Errorf("%d Map-Requests for site d, want one, straight to ms2", after.MapRequests-before.MapRequests)
	}

	if err := <-transferred; err != nil {
		t.Errorf("the transfer running while ms1 died: %v", err)
	}
}

func processOf(t *testing.T, st *State, node, daemonName string) Process {
	t.Helper()
	for _, p := range st.Processes {
		if p.Node == node && p.Daemon == daemonName {
			return p
		}
	}
	t.Fatalf("no %s on %s", daemonName, node)
	return Process{}
}

func lispdStatus(t *testing.T, p Process) *daemon.Status {
	t.Helper()
	s, err := daemon.QueryStatus(p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cacheCounters(t *testing.T, p Process) daemon.TunnelCounters {
	t.Helper()
	return *lispdStatus(t, p).Counters.Tunnel
}

// resolvedAfter is how long after start the map-cache of p held prefix,
// by its installation time.
func resolvedAfter(t *testing.T, p Process, prefix string, start time.Time) time.Duration {
	t.Helper()
	for _, e := range lispdStatus(t, p).MapCache {
		if e.EIDPrefix == prefix {
			return e.Installed.Sub(start)
		}
	}
	t.Fatalf("%s not in %s's map-cache", prefix, p.Node)
	return 0
}
