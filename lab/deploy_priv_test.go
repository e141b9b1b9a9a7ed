package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/deploy"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
)

// TestDeployment builds the lab of docs/deploy.md, two organisations
// joined by a DDT root: every daemon runs with the command line of its
// unit in deploy/, the namespaces have deploy/'s kernel settings, and an
// MPTCP transfer goes from one organisation's host to the other's, the
// sites resolved through the tree.
func TestDeployment(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-dep"
	st, opts, top := upLab(t, name, docTopologyOf(t, "../docs/deploy.md", name), nil)
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
	})
}

// cmdline is a process's argv.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
