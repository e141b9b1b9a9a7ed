package topo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/pm"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// docExample is the topology of docs/lab.md.
func docExample(t *testing.T) []byte {
	t.Helper()
	text, err := os.ReadFile("../../docs/lab.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
		if strings.Contains(m[1], "nodes:") {
			return []byte(m[1])
		}
	}
	t.Fatal("no topology in docs/lab.md")
	return nil
}

func compileDoc(t *testing.T) *Plan {
	t.Helper()
	top, err := Parse(docExample(t))
	if err != nil {
		t.Fatalf("docs/lab.md's example does not load:\n%v", err)
	}
	p, err := Compile(top, "/run/amptcp-lab/demo")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDocExampleCompiles(t *testing.T) {
	p := compileDoc(t)
	if p.Prefix != "amptcp-lab-demo-" || p.Node("xtra").Namespace != "amptcp-lab-demo-xtra" {
		t.Errorf("prefix %q, xtra in %q", p.Prefix, p.Node("xtra").Namespace)
	}
	// Addresses: hosts' links from their sites' prefixes, the others from
	// 10.255.0.0/16, in the order of the links.
	wantLinks := map[string][2]string{
		"client-xtra": {"10.1.0.2/30", "10.1.0.1/30"},
		"server-xtrb": {"10.2.0.2/30", "10.2.0.1/30"},
		"xtra-core":   {"10.255.0.1/30", "10.255.0.2/30"},
		"core-xtrb":   {"10.255.0.5/30", "10.255.0.6/30"},
		"xtra-rtr1":   {"10.255.0.9/30", "10.255.0.10/30"},
		"rtr1-xtrb":   {"10.255.0.13/30", "10.255.0.14/30"},
		"core-ms":     {"10.255.0.17/30", "10.255.0.18/30"},
	}
	for _, l := range p.Links {
		if got := [2]string{l.A.Address.String(), l.B.Address.String()}; got != wantLinks[l.Name] {
			t.Errorf("link %s: addresses %v, want %v", l.Name, got, wantLinks[l.Name])
		}
	}
	if s := p.Site("a"); s.EIDPrefix.String() != "10.1.0.0/24" || s.XTR != "xtra" || len(s.Key) != 32 {
		t.Errorf("site a: %+v", s)
	}

	// Routes: the client's default through xtra; xtra reaches the ms's
	// subnet through core, and rtr1-xtrb's directly through rtr1; no
	// xTR has a route to another site's EID prefix, and the ms has one to
	// each, towards its xTR, for its Map-Replies to hosts.
	routes := func(node string) []string {
		var out []string
		for _, r := range p.Node(node).Routes {
			out = append(out, r.String())
		}
		return out
	}
	if got := routes("client"); strings.Join(got, "; ") != "default via 10.1.0.1 dev eth0" {
		t.Errorf("client's routes: %v", got)
	}
	wantXTRA := "10.255.0.4/30 via 10.255.0.2 dev eth1; 10.255.0.12/30 via 10.255.0.10 dev eth2; 10.255.0.16/30 via 10.255.0.2 dev eth1"
	if got := strings.Join(routes("xtra"), "; "); got != wantXTRA {
		t.Errorf("xtra's routes:\n got %s\nwant %s", got, wantXTRA)
	}
	wantMS := "10.255.0.0/30 via 10.255.0.17 dev eth0; 10.255.0.4/30 via 10.255.0.17 dev eth0; " +
		"10.255.0.8/30 via 10.255.0.17 dev eth0; 10.255.0.12/30 via 10.255.0.17 dev eth0; " +
		"10.1.0.0/24 via 10.255.0.17 dev eth0; 10.2.0.0/24 via 10.255.0.17 dev eth0"
	if got := strings.Join(routes("ms"), "; "); got != wantMS {
		t.Errorf("ms's routes:\n got %s\nwant %s", got, wantMS)
	}
	for _, n := range p.Nodes {
		if n.Role != RoleXTR {
			continue
		}
		for _, r := range n.Routes {
			if r.Dst.IsValid() && (r.Dst.Overlaps(p.Site("a").EIDPrefix) || r.Dst.Overlaps(p.Site("b").EIDPrefix)) {
				t.Errorf("%s has a route to an EID prefix: %s", n.Name, r)
			}
		}
	}

	// Site a registers xtra's two RLOCs; site b the ELP through rtr1: its
	// hop at rtr1 is rtr1's address toward xtra, then xtrb's RLOC on the
	// link to rtr1.
	xa := p.Node("xtra").Lispd
	if got := xa.Dataplane.EIDInterfaces; strings.Join(got, ",") != "eth0" {
		t.Errorf("xtra's EID interfaces %v", got)
	}
	if got := xa.Dataplane.RLOCInterfaces; strings.Join(got, ",") != "eth1,eth2" {
		t.Errorf("xtra's RLOC interfaces %v", got)
	}
	// Every tunnel router of the lab is lispd's: LISP-GPE to all of them.
	for _, name := range []string{"xtra", "rtr1"} {
		if got := p.Node(name).Lispd.Dataplane.LISPGPE; strings.Join(got.Peers, ",") != "0.0.0.0/0,::/0" || !got.GROOn() {
			t.Errorf("%s's lisp-gpe %+v", name, got)
		}
	}
	locs := xa.XTR.DatabaseMappings[0].Locators
	if len(locs) != 2 || locs[0].Address != "10.255.0.1" || locs[1].Address != "10.255.0.9" {
		t.Errorf("site a's locators: %+v", locs)
	}
	xb := p.Node("xtrb").Lispd
	elp := xb.XTR.DatabaseMappings[0].Locators
	if len(elp) != 1 || len(elp[0].ELP) != 2 || elp[0].ELP[0].Address != "10.255.0.10" || elp[0].ELP[1].Address != "10.255.0.14" {
		t.Errorf("site b's locators: %+v", elp)
	}
	if ms := xb.XTR.MapServers; len(ms) != 1 || ms[0].Address != "10.255.0.18" || ms[0].Secret != p.Site("b").Key {
		t.Errorf("xtrb's map-servers: %+v", ms)
	}
	if got := p.Node("ms").Lispd.MapServer.Sites; len(got) != 2 || got[1].EIDPrefixes[0].InstanceID != 1000 {
		t.Errorf("ms's sites: %+v", got)
	}
	if p.Node("core").Lispd != nil || p.Node("client").Lispd != nil {
		t.Error("a router or a host runs lispd")
	}

	// The client's amptcp policy asks the lab's ms and its own xTR.
	c := p.Node("client").PM
	if c == nil || c.AMPTCP.MapResolver != "10.255.0.18" || c.AMPTCP.XTR != "10.1.0.1" || *c.AMPTCP.InstanceID != 1000 ||
		c.Control.Socket != "/run/amptcp-lab/demo/client.pm.sock" {
		t.Errorf("client's pm: %+v %+v", c, c.AMPTCP)
	}

	// Emulation: the link emulator's parameters, defaults included.
	l := p.Links[2]
	if !l.Emulated || l.Params.Rate != 8e6 || l.Params.Delay != 10*time.Millisecond || l.Params.QueueBytes != 64000 {
		t.Errorf("xtra-core: %+v", l)
	}
	ge := p.Links[4].Params
	if ge.Rate != DefaultRate || ge.Loss != (linkemu.Loss{Model: linkemu.GilbertElliott, P: 0.01, R: 0.3, LossGood: 0, LossBad: 1}) ||
		ge.QueueBytes != int(1e9*0.040/8) {
		t.Errorf("xtra-rtr1: %+v", ge)
	}
	if p.Links[0].Emulated {
		t.Error("client-xtra has no emulation settings but is emulated")
	}
	if len(p.Timeline) != 4 || p.Timeline[2].At.Duration != 10*time.Second {
		t.Errorf("timeline: %+v", p.Timeline)
	}
}

// The generated configurations load as lispd and amptcp pm load them.
func TestGeneratedConfigsLoad(t *testing.T) {
	p := compileDoc(t)
	dir := t.TempDir()
	lispds := 0
	for _, n := range p.Nodes {
		if n.Lispd != nil {
			b, err := n.LispdYAML()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, n.Name+".lispd.yaml")
			os.WriteFile(path, b, 0o600)
			if _, err := config.Load(path); err != nil {
				t.Errorf("%s's lispd configuration:\n%v\n%s", n.Name, err, b)
			}
			lispds++
		}
		if n.PM != nil {
			b, err := n.PMYAML()
			if err != nil {
				t.Fatal(err)
			}
			c, err := pm.Parse(b)
			if err != nil {
				t.Errorf("%s's pm configuration:\n%v\n%s", n.Name, err, b)
			} else if c.Policy != n.PM.Policy {
				t.Errorf("%s: policy %s, want %s", n.Name, c.Policy, n.PM.Policy)
			}
		}
	}
	if lispds != 4 {
		t.Fatalf("%d lispd configurations, want 4 (2 xtrs, rtr, ms)", lispds)
	}
	if testing.Short() {
		return
	}
	// The real lispd -check takes them (built here: it is quick when cached).
	bin := filepath.Join(t.TempDir(), "lispd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/amptcp/amptcp/cmd/lispd").CombinedOutput(); err != nil {
		t.Fatalf("build lispd: %v\n%s", err, out)
	}
	for _, n := range p.Nodes {
		if n.Lispd == nil {
			continue
		}
		out, err := exec.Command(bin, "-config", filepath.Join(dir, n.Name+".lispd.yaml"), "-check").CombinedOutput()
		if err != nil {
			t.Errorf("lispd -check %s: %v\n%s", n.Name, err, out)
		}
	}
}

func TestCompileIsDeterministic(t *testing.T) {
	a, b := compileDoc(t), compileDoc(t)
	for i := range a.Nodes {
		if a.Nodes[i].Lispd == nil {
			continue
		}
		ya, _ := a.Nodes[i].LispdYAML()
		yb, _ := b.Nodes[i].LispdYAML()
		if string(ya) != string(yb) {
			t.Errorf("%s: two compilations differ:\n%s\n%s", a.Nodes[i].Name, ya, yb)
		}
	}
}

// An xtr choosing its own RLOC by the port sum sends each RLOC link's
// packets to the neighbour on it.
func TestSourceSelectionGateways(t *testing.T) {
	text := strings.Replace(string(docExample(t)), "{name: xtra, role: xtr, site: a}",
		"{name: xtra, role: xtr, site: a, source-selection: port-sum}", 1)
	top, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(top, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dp := p.Node("xtra").Lispd.Dataplane
	if dp.SourceSelection != "port-sum" || len(dp.RLOCGateways) != 2 ||
		dp.RLOCGateways["eth1"] != "10.255.0.2" || dp.RLOCGateways["eth2"] != "10.255.0.10" {
		t.Errorf("xtra's dataplane: source-selection %q, gateways %v", dp.SourceSelection, dp.RLOCGateways)
	}
	if dp := p.Node("xtrb").Lispd.Dataplane; dp.SourceSelection != "routing" || len(dp.RLOCGateways) != 0 {
		t.Errorf("xtrb's dataplane: source-selection %q, gateways %v", dp.SourceSelection, dp.RLOCGateways)
	}
}

func TestValidateNamesEveryField(t *testing.T) {
	const bad = `
name: Bad_Name
instance-id: 16777216
nodes:
  - {name: h1, role: host, pm: {policy: fullmesh, subflows: 2}}
  - {name: h1, role: switch}
  - {name: x, role: xtr}
  - {name: r, role: rtr, site: a, eid-links: [l], source-selection: port-sum}
sites:
  - {name: a, eid-prefix: 10.1.0.1/24, elps: [[x]]}
links:
  - {ends: [h1, nowhere], rate: 8Mbyte, delay: -1ms, queue: lots, mtu: 100, loss: {gilbert-elliott: {p: 0.1, h: 1.5}}}
  - {ends: [x, r], addresses: [10.0.0.1/30]}
  - {ends: [x, r], name: second, loss: {bernoulli: 0.1, gilbert-elliott: {p: 0.1}}}
timeline:
  - {at: 1500us, link: x-r, rate: 1Mbit}
  - {at: 1s, link: second, action: down, rate: 1Mbit}
  - {at: 2s, link: second, direction: up-and-down, loss: {bernoulli: 2}}
  - {at: 3s, link: nolink, action: explode}
`
	_, err := Parse([]byte(bad))
	if err == nil {
		t.Fatal("a bad topology parsed")
	}
	for _, want := range []string{
		`name: "Bad_Name" is not a name`,
		"instance-id: 16777216 exceeds",
		"nodes[0].pm.subflows: only the subflows, ndiffports and binder policies",
		`nodes[1].name: "h1" is the name of another node`,
		`nodes[1].role: "switch" is not one of`,
		"nodes[2].site: missing",
		"nodes[3].site: only hosts and xtrs",
		"nodes[3].eid-links: only an xtr has it",
		"nodes[3].source-selection: only an xtr has it",
		"sites[0].eid-prefix: 10.1.0.1/24 has host bits set",
		`sites[0].elps[0][0]: "x" is not an rtr node`,
		`links[0].ends[1]: "nowhere" is not a node`,
		`links[0].rate: "8Mbyte" is not a rate`,
		`links[0].delay: "-1ms" is not a delay`,
		`links[0].queue: "lots" is not a queue size`,
		"links[0].mtu: 100 is not between",
		"links[0].loss.gilbert-elliott.h: 1.5 is not a probability",
		"links[1].addresses: give both ends' addresses, or none",
		"links[2].loss: bernoulli and gilbert-elliott both set",
		"nodes: xtrs and rtrs need a map-resolver",
		"timeline[0].at: 1.5ms is not a time",
		"timeline[0].link: x-r is not emulated",
		"timeline[1]: down takes no direction",
		`timeline[2].direction: "up-and-down" is not a-to-b or b-to-a`,
		"timeline[2].loss.bernoulli: 2 is not a probability",
		`timeline[3].link: "nolink" is not a link`,
		`timeline[3].action: "explode" is not down, up or set`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the errors do not say %q", want)
		}
	}
	if t.Failed() {
		t.Logf("the errors:\n%v", err)
	}
}

func TestParseIsStrict(t *testing.T) {
	_, err := Parse([]byte("name: x\nnodes: [{name: a, role: host, colour: red}]\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Fatalf("an unknown field: %v", err)
	}
}

func TestUnits(t *testing.T) {
	for s, want := range map[string]float64{"8Mbit": 8e6, "500kbit": 5e5, "1Gbit": 1e9, "1.5mbit": 1.5e6, "1200bit": 1200} {
		if got, err := ParseRate(s); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "8", "8Mbps", "-1Mbit", "0bit", "Mbit"} {
		if _, err := ParseRate(s); err == nil {
			t.Errorf("ParseRate(%q) succeeded", s)
		}
	}
	for s, want := range map[string]int{"150000": 150000, "64KB": 64000, "64KiB": 65536, "1MB": 1e6, "100 packets": 151800, "10p": 15180, "2000b": 2000} {
		if got, err := ParseQueue(s, 1500); err != nil || got != want {
			t.Errorf("ParseQueue(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-5KB", "lots", "1.5KB"} {
		if _, err := ParseQueue(s, 1500); err == nil {
			t.Errorf("ParseQueue(%q) succeeded", s)
		}
	}
}

// A link between routers with given addresses keeps them, and the pool
// skips the subnet they are in.
func TestGivenAddressesAndPool(t *testing.T) {
	top, err := Parse([]byte(`
name: t
nodes: [{name: a, role: router}, {name: b, role: router}, {name: c, role: router}]
links:
  - {ends: [a, b]}
  - {ends: [b, c], addresses: [10.255.0.5/30, 10.255.0.6/30]}
  - {ends: [c, a]}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(top, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range p.Links {
		got = append(got, l.A.Address.String()+"-"+l.B.Address.String())
	}
	if want := "10.255.0.1/30-10.255.0.2/30 10.255.0.5/30-10.255.0.6/30 10.255.0.9/30-10.255.0.10/30"; strings.Join(got, " ") != want {
		t.Errorf("addresses %v, want %s", got, want)
	}
}

// TestSizes reads and writes sizes of bytes.
func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "256KiB": 256 << 10, "1MiB": 1 << 20, "5MB": 5e6, "2kb": 2000, "1GiB": 1 << 30, " 7 B": 7} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1KiB", "1.5MiB", "lots", "1TiB", "1 MiB extra"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int64]string{256 << 10: "256KiB", 3 << 20: "3MiB", 2 << 30: "2GiB", 1000: "1000B", 1536 << 10: "1536KiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestNewEvent: the events people give, Bernoulli and Gilbert-Elliott
// losses included, and what is wrong with theirs.
func TestNewEvent(t *testing.T) {
	ev, err := NewEvent("p1", "set", "a-to-b", "", "30ms", "ge:0.01,0.3", "")
	if err != nil || ev.Loss == nil || ev.Loss.GilbertElliott == nil || *ev.Loss.GilbertElliott.P != 0.01 || *ev.Loss.GilbertElliott.R != 0.3 || ev.Loss.GilbertElliott.H != nil {
		t.Fatalf("ge: %+v, %v", ev, err)
	}
	if m, err := ev.Loss.Model(); err != nil || m.Model != linkemu.GilbertElliott || m.LossBad != 1 {
		t.Errorf("ge model %+v, %v", m, err)
	}
	if got := ev.Detail(); got != "a-to-b delay 30ms Gilbert-Elliott loss" {
		t.Errorf("detail %q", got)
	}
	if ev, err := NewEvent("p1", "set", "", "", "", "2%", ""); err != nil || *ev.Loss.Bernoulli != 0.02 || ev.Detail() != "loss 2%" {
		t.Errorf("2%%: %+v, %v", ev, err)
	}
	for _, bad := range [][2]string{{"set", "ge:0.1"}, {"set", "lots"}, {"explode", ""}, {"down", "1%"}} {
		if _, err := NewEvent("p1", bad[0], "", "", "", bad[1], ""); err == nil {
			t.Errorf("%s with loss %q: no error", bad[0], bad[1])
		}
	}
}
