package topo

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/config"
)

// deployTopology is the lab of docs/deploy.md.
func deployTopology(t *testing.T) *Topology {
	t.Helper()
	text, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(text), -1) {
		if strings.Contains(m[1], "nodes:") {
			top, err := Parse([]byte(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			return top
		}
	}
	t.Fatal("no topology in docs/deploy.md")
	return nil
}

// With a ddt-node, each ms serves the sites that name it and resolves
// the others through the root, which refers each site to its ms.
func TestCompileDDT(t *testing.T) {
	p, err := Compile(deployTopology(t), "/run/amptcp-lab/deploy")
	if err != nil {
		t.Fatal(err)
	}
	addr := func(node string) string { return p.Node(node).Interfaces[0].Address.Addr().String() }
	root := p.Node("root")
	if root.LispdInstance != "ddt" || !root.Lispd.Has(config.RoleDDTNode) {
		t.Fatalf("root: instance %q, roles %v", root.LispdInstance, root.Lispd.Roles)
	}
	dels := root.Lispd.DDTNode.Delegations
	if len(dels) != 2 || dels[0].Prefix != p.Site("a").EIDPrefix.String() || dels[0].Type != config.DelegateMapServer ||
		len(dels[0].Referrals) != 1 || dels[0].Referrals[0].Address != addr("msa") || dels[1].Referrals[0].Address != addr("msb") {
		t.Errorf("root's delegations %+v", dels)
	}
	msa := p.Node("msa").Lispd
	if len(msa.MapServer.Sites) != 1 || msa.MapServer.Sites[0].Name != "a" {
		t.Errorf("msa serves %+v, want site a only", msa.MapServer.Sites)
	}
	if d := msa.MapResolver.DDT; d == nil || len(d.Root) != 1 || d.Root[0].Address != addr("root") {
		t.Errorf("msa's DDT root %+v", d)
	}
	xtra := p.Node("xtra").Lispd
	if len(xtra.XTR.MapServers) != 1 || xtra.XTR.MapServers[0].Address != addr("msa") ||
		len(xtra.MapCache.MapResolvers) != 1 || xtra.MapCache.MapResolvers[0] != addr("msa") {
		t.Errorf("xtra registers with %+v and asks %v, want msa", xtra.XTR.MapServers, xtra.MapCache.MapResolvers)
	}
	if mr := p.Node("client").PM.AMPTCP.MapResolver; mr != addr("msa") {
		t.Errorf("client's pm asks %s, want its site's msa", mr)
	}
	if p.EtcDir("xtra") != "/run/amptcp-lab/deploy/xtra/etc/amptcp" {
		t.Errorf("etc dir %s", p.EtcDir("xtra"))
	}
}

func TestSiteMapServersNeedDDT(t *testing.T) {
	_, err := Parse([]byte(`
name: x
nodes:
  - {name: xtra, role: xtr, site: a}
  - {name: msa, role: ms}
  - {name: msb, role: ms}
  - {name: r, role: router}
sites: [{name: a, map-servers: [msa, nothere, r]}]
links: [{ends: [xtra, msa]}, {ends: [xtra, msb]}, {ends: [xtra, r]}]
`))
	for _, want := range []string{
		`sites[0].map-servers[1]: "nothere" is not an ms node`,
		`sites[0].map-servers[2]: "r" is not an ms node`,
		"sites[0].map-servers: the other ms nodes cannot resolve site a without a node of role ddt-node",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in: %v", want, err)
		}
	}
	_, err = Parse([]byte("name: x\nnodes: [{name: root, role: ddt-node}]\n"))
	if err == nil || !strings.Contains(err.Error(), "a ddt-node refers sites to map-servers: add a node of role ms") {
		t.Errorf("ddt-node without ms: %v", err)
	}
}
