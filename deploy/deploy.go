// Package deploy holds what amptcp installs on real hosts (docs/deploy.md):
// the systemd units of lispd, one per kind of role, and of amptcp pm;
// example configurations; the kernel settings of hosts and routers; and
// firewall rules. It reads them too, so that the lab starts its daemons
// with the units' own command lines and applies the same kernel
// settings: what the lab runs is what the deployment documents.
package deploy

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/amptcp/amptcp/config"
)

//go:embed systemd etc sysctl.d nftables
var files embed.FS

// The directories of a host as the units name them.
const (
	BinDir    = "/usr/local/bin"
	ConfigDir = "/etc/amptcp"
)

// The units.
const (
	LispdUnit       = "lispd@.service"        // map-server, map-resolver, ddt-node
	LispdRouterUnit = "lispd-router@.service" // xtr, rtr: the eBPF data plane
	PMUnit          = "amptcp-pm.service"
)

// The kernel settings, by kind of host.
const (
	HostSysctls   = "90-amptcp-host.conf"
	RouterSysctls = "90-amptcp-router.conf"
)

// The firewall (nftables/): the ruleset for /etc/nftables.conf, whose
// input chain includes the files of NFTablesDir, and those files, one
// per daemon, as an operator installs them there.
const (
	NFTablesConf = "nftables.conf"
	NFTablesDir  = "/etc/nftables.d"
	LispdRules   = "lispd.nft"     // every host running lispd, any role
	PMRules      = "amptcp-pm.nft" // every host running amptcp pm
)

// FS is the deploy directory: systemd/, etc/amptcp/, sysctl.d/,
// nftables/.
func FS() fs.FS { return files }

// UnitFor names the unit that runs a lispd with these roles: the router
// unit when it has a data plane (xtr, rtr), the other one otherwise.
func UnitFor(roles []config.Role) string {
	if slices.Contains(roles, config.RoleXTR) || slices.Contains(roles, config.RoleRTR) {
		return LispdRouterUnit
	}
	return LispdUnit
}

// Unit is what the lab needs of a systemd unit: its command lines.
type Unit struct {
	Name         string
	ExecStartPre [][]string
	ExecStart    []string
}

// LoadUnit reads the unit name from systemd/.
func LoadUnit(name string) (*Unit, error) {
	b, err := files.ReadFile(path.Join("systemd", name))
	if err != nil {
		return nil, err
	}
	u := &Unit{Name: name}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, ";"):
			continue
		case strings.HasPrefix(text, "["):
			section = text
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok || section != "[Service]" || (key != "ExecStart" && key != "ExecStartPre") {
			continue
		}
		// The units' commands are plain words: no quoting, no prefixes
		// such as "-" or "@", so that a split on spaces is their argv.
		if strings.ContainsAny(value, `"'\$`) || strings.ContainsAny(value[:1], "-@:+!") {
			return nil, fmt.Errorf("%s:%d: %s is not a plain command line", name, line, key)
		}
		argv := strings.Fields(value)
		if key == "ExecStart" {
			if u.ExecStart != nil {
				return nil, fmt.Errorf("%s:%d: a second ExecStart", name, line)
			}
			u.ExecStart = argv
		} else {
			u.ExecStartPre = append(u.ExecStartPre, argv)
		}
	}
	if u.ExecStart == nil {
		return nil, fmt.Errorf("%s: no ExecStart", name)
	}
	return u, nil
}

// Host says where a host keeps what the units name BinDir and
// ConfigDir, and the firewall NFTablesDir: a lab node keeps them in
// directories of its own.
type Host struct {
	Bin, Config, NFTables string
}

// Command is a command line of the unit for an instance ("" for a unit
// that is no template) on host h: %i expanded, and the binary and the
// configuration taken from h's directories.
func (h Host) Command(argv []string, instance string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		a = strings.ReplaceAll(a, "%i", instance)
		for _, d := range []struct{ from, to string }{{BinDir, h.Bin}, {ConfigDir, h.Config}} {
			if rest, ok := strings.CutPrefix(a, d.from+"/"); ok && d.to != "" {
				a = path.Join(d.to, rest)
			}
		}
		out[i] = a
	}
	return out
}

// ConfigPath is where the unit's instance reads its configuration on h:
// the argument after -config of its ExecStart.
func (u *Unit) ConfigPath(h Host, instance string) (string, error) {
	argv := h.Command(u.ExecStart, instance)
	for i, a := range argv {
		if a == "-config" && i+1 < len(argv) {
			return argv[i+1], nil
		}
	}
	return "", fmt.Errorf("%s: ExecStart has no -config", u.Name)
}

// Sysctls reads a file of sysctl.d/: the settings in their order, as
// key and value.
func Sysctls(name string) ([][2]string, error) {
	b, err := files.ReadFile(path.Join("sysctl.d", name))
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not key = value", name, i+1)
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out, nil
}

// Rules reads a file of nftables/.
func Rules(name string) ([]byte, error) {
	return files.ReadFile(path.Join("nftables", name))
}

// Ruleset is nftables.conf as host h loads it: its include reads h's
// NFTables directory.
func (h Host) Ruleset() ([]byte, error) {
	b, err := Rules(NFTablesConf)
	if err != nil {
		return nil, err
	}
	include := `include "` + NFTablesDir + `/*.nft"`
	if !strings.Contains(string(b), include) {
		return nil, fmt.Errorf("%s does not %s", NFTablesConf, include)
	}
	if h.NFTables == "" {
		return b, nil
	}
	return []byte(strings.ReplaceAll(string(b), include, `include "`+h.NFTables+`/*.nft"`)), nil
}
