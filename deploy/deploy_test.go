package deploy

import (
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/pm"
)

var secretFile = regexp.MustCompile(`secret-file: ([^\s,}\]]+)`)

// Every example configuration loads, and each names the control socket
// its unit's runtime directory holds: /run/lispd/<instance>.sock for
// lispd, /run/amptcp/pm.sock for the path manager.
func TestExampleConfigurations(t *testing.T) {
	entries, err := fs.ReadDir(files, "etc/amptcp")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var lispd []string
	metrics := map[string]string{} // port: instance
	for _, e := range entries {
		b, err := files.ReadFile(path.Join("etc/amptcp", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), ConfigDir+"/", dir+"/")
		for _, m := range secretFile.FindAllStringSubmatch(text, -1) {
			if err := os.WriteFile(m[1], []byte("a secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		instance := strings.TrimSuffix(e.Name(), ".yaml")
		if e.Name() == "pm.yaml" {
			c, err := pm.Parse([]byte(text))
			if err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			} else if c.Control.Socket != "/run/amptcp/pm.sock" {
				t.Errorf("%s: control socket %s, want /run/amptcp/pm.sock (the unit's RuntimeDirectory)", e.Name(), c.Control.Socket)
			} else {
				metricsPort(t, metrics, instance, c.Metrics.Listen)
			}
			continue
		}
		c, err := config.Parse([]byte(text))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		lispd = append(lispd, instance)
		metricsPort(t, metrics, instance, c.Metrics.Listen)
		if want := "/run/lispd/" + instance + ".sock"; c.Control.Socket != want {
			t.Errorf("%s: control socket %s, want %s", e.Name(), c.Control.Socket, want)
		}
		router := c.Has(config.RoleXTR) || c.Has(config.RoleRTR)
		if got := UnitFor(c.Roles); (got == LispdRouterUnit) != router {
			t.Errorf("%s (roles %v) runs under %s", e.Name(), c.Roles, got)
		}
	}
	if want := []string{"ddt-root", "mr", "ms", "rtr", "xtr"}; !slices.Equal(lispd, want) {
		t.Errorf("lispd examples %v, want %v", lispd, want)
	}
}

// metricsPort notes an example's metrics port: each its own, since one
// host may run several daemons (lispd@ms and lispd@ddt-root), and within
// the firewall rules' range.
func metricsPort(t *testing.T, seen map[string]string, instance, listen string) {
	t.Helper()
	if listen == "" {
		return
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Errorf("%s: metrics.listen %q: %v", instance, listen, err)
		return
	}
	if other, ok := seen[port]; ok {
		t.Errorf("%s and %s both serve metrics on port %s", other, instance, port)
	}
	seen[port] = instance
	for _, rules := range []string{LispdRules, PMRules} {
		b, err := Rules(rules)
		if err != nil {
			t.Fatal(err)
		}
		m := metricsRule.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s: no metrics rule", rules)
		}
		p, _ := strconv.Atoi(port)
		lo, _ := strconv.Atoi(m[1])
		hi, _ := strconv.Atoi(m[2])
		if p < lo || p > hi {
			t.Errorf("%s: metrics port %s outside %s's %s-%s", instance, port, rules, m[1], m[2])
		}
	}
}

var metricsRule = regexp.MustCompile(`tcp dport (\d+)-(\d+) accept comment "metrics"`)

// The ruleset includes the files an operator puts in /etc/nftables.d,
// read from a lab node's directory there, and every file of nftables/
// is one that docs/deploy.md names.
func TestFirewallFiles(t *testing.T) {
	real, err := Host{}.Ruleset()
	if err != nil {
		t.Fatal(err)
	}
	lab, err := Host{NFTables: "/run/lab/n1/etc/nftables.d"}.Ruleset()
	if err != nil {
		t.Fatal(err)
	}
	include := `include "` + NFTablesDir + `/*.nft"`
	if want := strings.ReplaceAll(string(real), include, `include "/run/lab/n1/etc/nftables.d/*.nft"`); string(lab) != want || want == string(real) {
		t.Errorf("a lab node's ruleset:\n%s\nwant\n%s", lab, want)
	}
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(files, "nftables")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !strings.Contains(string(doc), "deploy/nftables/"+e.Name()) {
			t.Errorf("docs/deploy.md does not name deploy/nftables/%s", e.Name())
		}
	}
	if want := []string{PMRules, LispdRules, NFTablesConf}; !slices.Equal(names, want) {
		t.Errorf("nftables/ holds %v, want %v", names, want)
	}
}

// The units' command lines read the instance's configuration from
// /etc/amptcp, check it first, and become a lab node's with its
// directories.
func TestUnitCommands(t *testing.T) {
	for _, tc := range []struct{ unit, instance, start, pre string }{
		{LispdUnit, "ms", "/usr/local/bin/lispd -config /etc/amptcp/ms.yaml", "/usr/local/bin/lispd -config /etc/amptcp/ms.yaml -check"},
		{LispdRouterUnit, "xtr", "/usr/local/bin/lispd -config /etc/amptcp/xtr.yaml", "/usr/local/bin/lispd -config /etc/amptcp/xtr.yaml -check"},
		{PMUnit, "", "/usr/local/bin/amptcp pm -config /etc/amptcp/pm.yaml", "/usr/local/bin/amptcp pm -check -config /etc/amptcp/pm.yaml"},
	} {
		u, err := LoadUnit(tc.unit)
		if err != nil {
			t.Fatal(err)
		}
		real := Host{}
		if got := strings.Join(real.Command(u.ExecStart, tc.instance), " "); got != tc.start {
			t.Errorf("%s ExecStart: %s, want %s", tc.unit, got, tc.start)
		}
		if len(u.ExecStartPre) != 1 || strings.Join(real.Command(u.ExecStartPre[0], tc.instance), " ") != tc.pre {
			t.Errorf("%s ExecStartPre: %v, want %s", tc.unit, u.ExecStartPre, tc.pre)
		}
		lab := Host{Bin: "/tmp/bin", Config: "/run/lab/n1/etc"}
		got := strings.Join(lab.Command(u.ExecStart, tc.instance), " ")
		want := strings.NewReplacer("/usr/local/bin", "/tmp/bin", "/etc/amptcp", "/run/lab/n1/etc").Replace(tc.start)
		if got != want {
			t.Errorf("%s on a lab node: %s, want %s", tc.unit, got, want)
		}
		if p, err := u.ConfigPath(lab, tc.instance); err != nil || !strings.HasPrefix(p, "/run/lab/n1/etc/") {
			t.Errorf("%s: config path %s, %v", tc.unit, p, err)
		}
	}
}

func TestSysctls(t *testing.T) {
	for _, name := range []string{HostSysctls, RouterSysctls} {
		s, err := Sysctls(name)
		if err != nil || len(s) == 0 {
			t.Fatalf("%s: %v, %v", name, s, err)
		}
		for _, kv := range s {
			if !strings.HasPrefix(kv[0], "net.") {
				t.Errorf("%s: %s is not a per-namespace net.* setting", name, kv[0])
			}
		}
	}
	host, _ := Sysctls(HostSysctls)
	if !slices.Contains(host, [2]string{"net.mptcp.enabled", "1"}) {
		t.Errorf("hosts: %v, want MPTCP enabled", host)
	}
}

// systemd finds nothing wrong in the units, but that the binaries are
// not installed here.
func TestUnitsVerify(t *testing.T) {
	analyze := testenv.RequireTool(t, "systemd-analyze")
	dir := t.TempDir()
	var units []string
	for _, name := range []string{LispdUnit, LispdRouterUnit, PMUnit} {
		b, err := files.ReadFile(path.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		inst := strings.Replace(name, "@.", "@example.", 1)
		if err := os.WriteFile(filepath.Join(dir, inst), b, 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, filepath.Join(dir, inst))
	}
	out, _ := exec.Command(analyze, append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "is not executable: No such file or directory") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
