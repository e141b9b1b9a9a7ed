package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/pm"
)

// teTopology has a site b with three ELPs and a multi-homed host m.
const teTopology = `name: te
nodes:
  - {name: client, role: host}
  - {name: server, role: host, pm: {policy: default}}
  - {name: m, role: host}
  - {name: xtra, role: xtr, site: a}
  - {name: xtrb, role: xtr, site: b}
  - {name: r1, role: rtr}
  - {name: r2, role: rtr}
  - {name: r3, role: rtr}
  - {name: core, role: router}
  - {name: ms, role: ms}
sites:
  - {name: a}
  - {name: b, elps: [[r1], [r2], [r3]]}
links:
  - {ends: [client, xtra]}
  - {ends: [server, xtrb]}
  - {name: l1, ends: [xtra, r1], rate: 10Mbit}
  - {name: l2, ends: [xtra, r2], rate: 10Mbit}
  - {name: l3, ends: [xtra, r3], rate: 10Mbit}
  - {ends: [r1, xtrb]}
  - {ends: [r2, xtrb]}
  - {ends: [r3, xtrb]}
  - {ends: [xtra, core]}
  - {ends: [core, ms]}
  - {name: m1, ends: [m, core], rate: 5Mbit}
  - {name: m2, ends: [m, core], rate: 5Mbit}
`

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"te.yaml": teTopology, "exp.yaml": text} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "exp.yaml")
}

const teScenario = `name: te-exp
topology: te.yaml
flows:
  - {name: bulk, from: client, to: server, kind: saturated, duration: 60s}
flow-sets:
  first: [{name: side, from: m, to: server, from-link: m1, kind: saturated, duration: 60s}]
  second: [{name: side, from: m, to: server, from-link: m2, kind: saturated, duration: 60s, connect-timeout: 10s}]
variants:
  - {mode: SD, pm: ndiffports 2, elps: 0, binding: port-sum, cc: cubic, flows: first}
  - {mode: SL, pm: [subflows 2, subflows 3], elps: 3, binding: stateless, cc: cubic, flows: [first, second]}
  - {mode: SF, pm: subflows 2, elps: 2, binding: stateful, cc: cubic, flows: first}
failures:
  stagger: {links: [l1, l2, l3], count: 2, at: 10s, stagger: 2s, restore: {after: 2s, stagger: 2s}, side: both}
  outage: {links: [l1], at: 10s, for: 100ms}
repetitions: 30
claims:
  - {id: x-a, figure: Fig. 8, metric: goodput, flow: bulk, of: {mode: SL}, over: {mode: SD}, range: [1.1, 1.25]}
short:
  repetitions: 2
  variants: {mode: SD, pm: ndiffports 2, elps: 0, binding: port-sum, cc: cubic, flows: first}
`

// TestVariantList: a list of mappings runs each mapping's combinations
// in turn (a paper's modes), and their dimensions set the path manager,
// the number of ELPs registered, the xTRs' binding and the flow set.
func TestVariantList(t *testing.T) {
	s, err := Load(writeScenario(t, teScenario))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range s.Variants.Matrix() {
		names = append(names, v.String())
	}
	want := []string{
		"mode=SD pm=ndiffports 2 elps=0 binding=port-sum cc=cubic flows=first",
		"mode=SL pm=subflows 2 elps=3 binding=stateless cc=cubic flows=first",
		"mode=SL pm=subflows 2 elps=3 binding=stateless cc=cubic flows=second",
		"mode=SL pm=subflows 3 elps=3 binding=stateless cc=cubic flows=first",
		"mode=SL pm=subflows 3 elps=3 binding=stateless cc=cubic flows=second",
		"mode=SF pm=subflows 2 elps=2 binding=stateful cc=cubic flows=first",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("variants:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if d := s.Variants.Dimension(DimPM); d == nil || !slices.Equal(d.Values, []string{"ndiffports 2", "subflows 2", "subflows 3"}) {
		t.Errorf("pm dimension %+v: want every value of the list", d)
	}
	m := s.Variants.Matrix()
	sd, sf := s.TopologyFor(m[0]), s.TopologyFor(m[5])
	site := func(tp *topo.Topology) topo.Site {
		return tp.Sites[slices.IndexFunc(tp.Sites, func(s topo.Site) bool { return s.Name == "b" })]
	}
	if len(site(sd).ELPs) != 0 || len(site(sf).ELPs) != 2 || len(s.Topo.Sites[1].ELPs) != 3 {
		t.Errorf("ELPs: SD %d, SF %d, the scenario's %d: want 0, 2 and 3 kept", len(site(sd).ELPs), len(site(sf).ELPs), len(s.Topo.Sites[1].ELPs))
	}
	for _, n := range sf.Nodes {
		if n.Role == topo.RoleXTR && n.MPTCPSubflows != "bind-stateful" {
			t.Errorf("SF: %s's mptcp-subflows %q, want bind-stateful", n.Name, n.MPTCPSubflows)
		}
		if n.Name == "client" && (n.PM.Policy != pm.PolicySubflows || n.PM.Subflows != 2) {
			t.Errorf("SF: client's pm %+v", n.PM)
		}
	}
	for _, n := range sd.Nodes {
		if n.Role == topo.RoleXTR && (n.MPTCPSubflows != "off" || n.PathSelection != "port-sum") {
			t.Errorf("SD: %s: %q, %q, want off and port-sum", n.Name, n.MPTCPSubflows, n.PathSelection)
		}
	}
	plan := s.Plan(m[2])
	if len(plan) != 2 || plan[1].Name != "side" || plan[1].FromLink != "m2" || plan[1].ConnectTimeout == nil {
		t.Errorf("flows of %v: %+v, want bulk and the second set's side", m[2], plan)
	}
	if names := s.FlowNames(); !slices.Equal(names, []string{"bulk", "side"}) {
		t.Errorf("flow names %v", names)
	}
	if len(s.Claims) != 1 || s.Claims[0].Compare != "ratio" {
		t.Errorf("claims %+v, want one ratio", s.Claims)
	}
}

// TestFailurePattern: two of three links fail 2 s apart on both sides
// (an event per end), and come back 2 s after the last, first down first
// up; a 100 ms outage of one link.
func TestFailurePattern(t *testing.T) {
	s, err := Load(writeScenario(t, teScenario))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range s.Failures["stagger"] {
		got = append(got, e.At.String()+" "+e.Link+" "+string(e.Action)+" "+e.End)
	}
	want := []string{"10s l1 down a", "10s l1 down b", "12s l2 down a", "12s l2 down b",
		"14s l1 up a", "14s l1 up b", "16s l2 up a", "16s l2 up b"}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if o := s.Failures["outage"]; len(o) != 2 || o[1].At.Duration != 10100*time.Millisecond || o[1].End != "" {
		t.Errorf("outage %+v, want l1 down at 10 s and up at 10.1 s, the link itself", o)
	}
}

// TestShortVersion: the short block replaces what it gives; the rest,
// the claims too, stay (a claim on a variant the short version does not
// run is valid: it is not run).
func TestShortVersion(t *testing.T) {
	path := writeScenario(t, teScenario)
	s, err := LoadVersion(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Short || s.Repetitions != 2 || len(s.Variants.Matrix()) != 1 || len(s.Claims) != 1 || len(s.FailureSpecs) != 2 {
		t.Errorf("short: %v, %d repetitions, %d variants, %d claims: want 2, 1, the claim", s.Short, s.Repetitions, len(s.Variants.Matrix()), len(s.Claims))
	}
	full, err := Load(path)
	if err != nil || full.Short || full.Repetitions != 30 {
		t.Errorf("full: %v, %+v", err, full)
	}
	_, err = LoadVersion(writeScenario(t, strings.Replace(teScenario, "  repetitions: 2", "  topology: other.yaml", 1)), true)
	if err == nil || !strings.Contains(err.Error(), "short.topology: the short version changes only repetitions") {
		t.Errorf("a short topology: %v", err)
	}
}

// TestVariantErrors: each wrong value names its path.
func TestVariantErrors(t *testing.T) {
	bad := strings.NewReplacer(
		"elps: 3, binding: stateless", "elps: 4, binding: sideways",
		"flows: [first, second]", "flows: [first, third]",
		"from-link: m2", "from-link: l1",
		"count: 2", "count: 5",
		"for: 100ms", "for: 0s",
		"mode: SF", "mode: 'S F'",
	).Replace(teScenario)
	bad = strings.Replace(bad, "short:", "calibrate:\n  - {link: l9, param: loss, between: [0.1, 0.01], target: 1.6Mbit, flow: {from: m, to: server, kind: transfer, size: 1MiB}}\nshort:", 1)
	_, err := Load(writeScenario(t, bad))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`variants.elps[1]: "4" is not a number of ELPs from 0 (the sites' RLOCs) to 3`,
		`variants.binding[1]: "sideways" is not port-sum, stateless or stateful`,
		`variants.flows[1]: "third" is not a name of flow-sets`,
		`flow-sets.second[0].from-link: "l1" is not a link of m`,
		"failures.stagger.count: 5 of 3 links",
		"failures.outage.for: 0s is not a positive time",
		`variants.mode[2]: "S F" is not a mode's name`,
		`calibrate[0].link: "l9" is not an emulated link`,
		"calibrate[0].between: 0.1 is not below 0.01",
		"calibrate[0].figure: missing",
		"calibrate[0].flow.kind: a calibration measures a saturated flow",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nno %q", err, want)
		}
	}
}
