package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/deploy"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/pm"
)

// deployService is the firewall rule of the hosts' application, the
// test's MPTCP server, as an operator adds it (docs/deploy.md).
const deployService = `tcp dport 5201 accept comment "the application"`

// TestDeployment builds the lab of docs/deploy.md, two organisations
// joined by a DDT root: every daemon runs with the command line of its
// unit in deploy/, the namespaces have deploy/'s kernel settings and
// firewall (loaded before the daemons start), and an MPTCP transfer goes
// from one organisation's host to the other's, the sites resolved
// through the tree. What the firewall should refuse, it refuses.
func TestDeployment(t *testing.T) {
	testenv.RequireRoot(t)
	nft := testenv.RequireNFTables(t)
	name := testenv.Prefix + "-dep"
	st, opts, top := upLabWith(t, name, docTopologyOf(t, "../docs/deploy.md", name),
		Options{Firewall: &Firewall{Services: []string{deployService}}})
	plan, err := topo.Compile(top, opts.dir(name))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("each daemon runs its unit's command line", func(t *testing.T) {
		seen := map[string]bool{}
		for _, p := range st.Processes {
			if p.Daemon == linkdDaemon {
				continue
			}
			n := plan.Node(p.Node)
			unit, instance := deploy.PMUnit, ""
			if p.Daemon == "lispd" {
				unit, instance = deploy.UnitFor(n.Lispd.Roles), n.LispdInstance
			}
			u, err := deploy.LoadUnit(unit)
			if err != nil {
				t.Fatal(err)
			}
			want := deploy.Host{Bin: bin, Config: plan.EtcDir(n.Name)}.Command(u.ExecStart, instance)
			if got := cmdline(t, p.PID); !slices.Equal(got, want) {
				t.Errorf("%s's %s: %q, want %q (%s)", p.Node, p.Daemon, got, want, unit)
			}
			seen[fmt.Sprintf("%s@%s", unit, instance)] = true
		}
		for _, want := range []string{"lispd@.service@ms", "lispd@.service@ddt", "lispd-router@.service@xtr", "amptcp-pm.service@"} {
			if !seen[want] {
				t.Errorf("no daemon of %s: %v", want, seen)
			}
		}
	})

	t.Run("kernel settings of deploy/sysctl.d", func(t *testing.T) {
		for _, c := range []struct{ node, file string }{{"client", deploy.HostSysctls}, {"xtra", deploy.RouterSysctls}} {
			settings, err := deploy.Sysctls(c.file)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range settings {
				var got []byte
				err := (&netns.NS{Name: st.Prefix + c.node}).Do(func() (err error) {
					got, err = os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(kv[0], ".", "/")))
					return err
				})
				if err != nil || strings.TrimSpace(string(got)) != kv[1] {
					t.Errorf("%s: %s = %q (%v), want %s", c.node, kv[0], got, err, kv[1])
				}
			}
		}
	})

	// Every node that runs a daemon drops what its rules do not accept;
	// the underlay's router has no firewall.
	t.Run("the firewall of deploy/nftables", func(t *testing.T) {
		for _, n := range plan.Nodes {
			chain, err := inputChain(nft, n.Namespace)
			if n.Lispd == nil && n.PM == nil {
				if err == nil {
					t.Errorf("%s runs no daemon but has a firewall: %+v", n.Name, chain)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", n.Name, err)
				continue
			}
			if chain.Policy != "drop" {
				t.Errorf("%s: input policy %q, want drop", n.Name, chain.Policy)
			}
			for rule, want := range map[string]bool{
				lispControlRule: n.Lispd != nil, mapRepliesRule: n.PM != nil,
				"the application": n.Role == topo.RoleHost, refusedRule: true} {
				if _, ok := chain.Counters[rule]; ok != want {
					t.Errorf("%s: rule %q there %v, want %v (%v)", n.Name, rule, ok, want, chain.Counters)
				}
			}
		}
	})

	t.Run("an MPTCP transfer across organisations", func(t *testing.T) {
		if err := warmPair(context.Background(), st.Prefix+"client", st.Prefix+"server", netip.Addr{}, nextWarmPorts(), "10.2.0.2:5201"); err != nil {
			t.Fatal(err)
		}
		if err := transfer(st.Prefix+"client", st.Prefix+"server", "10.2.0.2:5201", 4<<20, true); err != nil {
			t.Fatal(err)
		}
		// xtra asked msa, which found site b through the root and msb.
		msa, err := daemon.QueryStatus(plan.Node("msa").LispdSocket)
		if err != nil {
			t.Fatal(err)
		}
		if r := msa.Counters.DDTResolver; r == nil || r.Resolved < 1 || r.Referrals["ms-referral"] < 1 {
			t.Errorf("msa's DDT resolution: %+v", r)
		}
		root, err := daemon.QueryStatus(plan.Node("root").LispdSocket)
		if err != nil {
			t.Fatal(err)
		}
		if d := root.Counters.DDT; d == nil || d.Referrals["ms-referral"] < 1 {
			t.Errorf("root's referrals: %+v", d)
		}
		// client's amptcp pm asked xtra for its own EID and msa for
		// server's, which msb, proxying for site b, answered: from
		// another address than the one asked.
		lookups, err := settledLookups(plan.Node("client").PMSocket, 2)
		if err != nil {
			t.Fatal(err)
		}
		if lookups["answered"] < 2 || lookups["failed"] > 0 {
			t.Errorf("client's mapping lookups: %v, want both of the connection's answered", lookups)
		}
	})

	// What came through the rules rather than as replies to conntrack:
	// the registrations (xTRs to their map-servers), the resolution
	// (msa's DDT Map-Requests to root, the request forwarded to msb,
	// msb's Map-Reply to xtra) and the answers to client's lookups.
	t.Run("registration and resolution through the rules", func(t *testing.T) {
		for _, c := range []struct{ node, rule string }{
			{"msa", lispControlRule}, {"msb", lispControlRule}, {"root", lispControlRule},
			{"xtra", lispControlRule}, {"client", mapRepliesRule}} {
			chain, err := inputChain(nft, plan.Node(c.node).Namespace)
			if err != nil {
				t.Fatal(err)
			}
			if chain.Counters[c.rule] < 1 {
				t.Errorf("%s: rule %q accepted nothing: %v", c.node, c.rule, chain.Counters)
			}
		}
	})

	// From core, the underlay: LISP data to a map-server and LISP
	// control to a host, neither of which serves it, are dropped (no
	// port unreachable comes back, the refused counter counts them);
	// what looks like a Map-Reply to a host's ephemeral port passes (the
	// host answers port unreachable, nothing listening there), unless
	// it comes from another port than LISP control's.
	t.Run("what the rules refuse", func(t *testing.T) {
		core := plan.Node("core")
		addrOf := func(node string) netip.Addr {
			for _, i := range core.Interfaces {
				if i.Peer == node {
					return plan.Node(node).Interface(i.Link).Address.Addr()
				}
			}
			return plan.Node(node).Interfaces[0].Address.Addr()
		}
		for _, c := range []struct {
			what     string
			node     string
			from, to uint16
			refused  bool
		}{
			{"LISP data to a map-server", "msa", 0, 4341, true},
			{"LISP control to a host", "client", 0, 4342, true},
			{"a Map-Reply to a host's ephemeral port", "client", 4342, 40001, false},
			{"a datagram from another port to that port", "client", 4343, 40001, true},
		} {
			ns := plan.Node(c.node).Namespace
			before, err := inputChain(nft, ns)
			if err != nil {
				t.Fatal(err)
			}
			to := netip.AddrPortFrom(addrOf(c.node), c.to)
			unreachable, sent, err := probeUDP(core.Namespace, c.from, to, c.refused)
			if err != nil {
				t.Fatalf("%s (%s): %v", c.what, to, err)
			}
			after, err := inputChain(nft, ns)
			if err != nil {
				t.Fatal(err)
			}
			dropped := after.Counters[refusedRule] - before.Counters[refusedRule]
			switch {
			case c.refused && (unreachable || dropped < uint64(sent)):
				t.Errorf("%s (%s): port unreachable %v, %d of %d datagrams counted refused; want all dropped",
					c.what, to, unreachable, dropped, sent)
			case !c.refused && !unreachable:
				t.Errorf("%s (%s): no port unreachable after %d datagrams; want it let through (%d counted refused)",
					c.what, to, sent, dropped)
			}
		}
	})
}

// settledLookups polls a host's amptcp pm until n of its mapping
// lookups have a result (a failed one takes lig's tries) and returns its
// lookup counters.
func settledLookups(socket string, n uint64) (map[string]uint64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := pm.QueryStatus(socket)
		if err != nil {
			return nil, err
		}
		c := st.Counters.Lookups
		if c["answered"]+c["negative"]+c["failed"] >= n || time.Now().After(deadline) {
			return c, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The rules' comments, which name their counters.
const (
	lispControlRule = "lisp control"
	mapRepliesRule  = "map-replies"
	refusedRule     = "refused"
)

// chainState is an input chain as nft lists it: its policy, and the
// packets each rule with a comment and a counter has counted.
type chainState struct {
	Policy   string
	Counters map[string]uint64
}

// inputChain lists the input chain of the firewall of docs/deploy.md in
// a namespace.
func inputChain(nft, ns string) (chainState, error) {
	cmd := exec.Command(nft, "-j", "list", "chain", "inet", "filter", "input")
	var out []byte
	err := (&netns.NS{Name: ns}).Do(func() (err error) {
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		return chainState{}, fmt.Errorf("nft list chain inet filter input: %w: %s", err, out)
	}
	var listing struct {
		NFTables []struct {
			Chain *struct {
				Policy string `json:"policy"`
			} `json:"chain"`
			Rule *struct {
				Comment string           `json:"comment"`
				Expr    []map[string]any `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &listing); err != nil {
		return chainState{}, fmt.Errorf("nft -j: %w", err)
	}
	st := chainState{Counters: map[string]uint64{}}
	for _, o := range listing.NFTables {
		if o.Chain != nil {
			st.Policy = o.Chain.Policy
		}
		if o.Rule == nil || o.Rule.Comment == "" {
			continue
		}
		st.Counters[o.Rule.Comment] += 0
		for _, e := range o.Rule.Expr {
			if c, ok := e["counter"].(map[string]any); ok {
				n, _ := c["packets"].(float64)
				st.Counters[o.Rule.Comment] += uint64(n)
			}
		}
	}
	return st, nil
}

// probeUDP sends datagrams from a namespace (from port from, any when 0)
// to an address, one every half second, and reports whether a port
// unreachable came back (the socket's ECONNREFUSED). It stops at the
// first, or after probeDatagrams; a probe that expects a drop
// (silent) sends them all.
func probeUDP(ns string, from uint16, to netip.AddrPort, silent bool) (unreachable bool, sent int, err error) {
	var c *net.UDPConn
	err = (&netns.NS{Name: ns}).Do(func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{Port: int(from)}, net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	buf := make([]byte, 64)
	n := probeDatagrams
	if silent {
		n = silentDatagrams
	}
	for sent < n {
		if _, err := c.Write([]byte("amptcp firewall probe")); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return true, sent, nil
			}
			return false, sent, err
		}
		sent++
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(buf); errors.Is(err, syscall.ECONNREFUSED) {
			return true, sent, nil
		} else if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return false, sent, err
		}
	}
	return false, sent, nil
}

// A port unreachable comes back within a round trip: a probe that
// expects one waits for it up to probeDatagrams half seconds; one that
// expects none listens for silentDatagrams.
const (
	probeDatagrams  = 60
	silentDatagrams = 6
)

// cmdline is a process's argv.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
