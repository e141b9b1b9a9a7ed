package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
	"github.com/amptcp/amptcp/pm"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// docFiles writes docs/lab.md's topology and scenario examples to a
// directory, as lab.yaml and experiment.yaml, and returns the scenario's
// path.
func docFiles(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("../../docs/lab.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var found int
	for _, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
		name := ""
		switch {
		case strings.Contains(m[1], "\nnodes:"):
			name = "lab.yaml"
		case strings.Contains(m[1], "\nflows:") && strings.Contains(m[1], "\nclaims:"):
			name = "claims.yaml"
		case strings.Contains(m[1], "\nflows:"):
			name = "experiment.yaml"
		default:
			continue
		}
		found++
		if err := os.WriteFile(filepath.Join(dir, name), []byte(m[1]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if found != 3 {
		t.Fatalf("docs/lab.md: %d of the topology, scenario and claims examples", found)
	}
	return filepath.Join(dir, "experiment.yaml")
}

// TestDocClaimsExample loads docs/lab.md's scenario with claims, both
// versions, and checks the claims it states.
func TestDocClaimsExample(t *testing.T) {
	path := filepath.Join(filepath.Dir(docFiles(t)), "claims.yaml")
	for _, short := range []bool{false, true} {
		s, err := LoadVersion(path, short)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Claims) != 2 || s.Claims[0].Metric != "recovery" || s.Claims[1].Compare != "ratio" || s.Claims[1].MannWhitney == nil {
			t.Errorf("short %v: claims %+v", short, s.Claims)
		}
		if evs := s.Failures["flap"]; len(evs) != 2 || evs[1].At.Duration != 7*time.Second {
			t.Errorf("short %v: the flap %+v, want down at 4 s and up at 7 s", short, evs)
		}
	}
}

// TestDocExample loads docs/lab.md's scenario and checks what it says it
// is: 24 runs, interleaved, [A-MPTCP]'s 30 files, the variants' settings.
func TestDocExample(t *testing.T) {
	s, err := Load(docFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	if len(runs) != 24 {
		t.Fatalf("%d runs, want 4 pm x 1 cc x 2 failures x 3 repetitions = 24", len(runs))
	}
	var got []string
	for _, r := range runs[:9] {
		got = append(got, r.ID+" "+r.Variant.String()+" rep "+string(rune('0'+r.Repetition)))
	}
	want := []string{
		"001 pm=tcp cc=cubic failure=none rep 1",
		"002 pm=tcp cc=cubic failure=core-flap rep 1",
		"003 pm=default cc=cubic failure=none rep 1",
		"004 pm=default cc=cubic failure=core-flap rep 1",
		"005 pm=amptcp cc=cubic failure=none rep 1",
		"006 pm=amptcp cc=cubic failure=core-flap rep 1",
		"007 pm=subflows 3 cc=cubic failure=none rep 1",
		"008 pm=subflows 3 cc=cubic failure=core-flap rep 1",
		"009 pm=tcp cc=cubic failure=none rep 2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	last := runs[23]
	if last.ID != "024" || last.Repetition != 3 || last.Index != 23 || last.Variant.String() != "pm=subflows 3 cc=cubic failure=core-flap" {
		t.Errorf("last run %+v", last)
	}

	sub3 := runs[6].Variant
	plan := s.Plan(sub3)
	if len(plan) != 3 || plan[0].Port != BasePort || plan[2].Port != BasePort+2 {
		t.Fatalf("plan %+v", plan)
	}
	files := plan[0].Traffic
	if len(files) != 30 || files[0].Bytes != 256<<10 || files[29].Bytes != 30*256<<10 || files[1].ID != "files/512KiB" {
		t.Errorf("the series: %d transfers, first %d bytes, last %d, second %q", len(files), files[0].Bytes, files[len(files)-1].Bytes, files[1].ID)
	}
	for _, f := range append(slices.Clone(files), plan[1].Traffic...) {
		if err := f.Validate(); err != nil {
			t.Error(err)
		}
		if f.CongestionControl != "cubic" || f.Protocol != traffic.MPTCP {
			t.Errorf("flow %s: %s over %s, want cubic over mptcp", f.ID, f.CongestionControl, f.Protocol)
		}
	}
	if files[0].Direction != traffic.Download || plan[1].Traffic[0].Direction != traffic.Upload || plan[1].Traffic[0].Duration != 10*time.Second {
		t.Errorf("directions %v and %v, bulk %v", files[0].Direction, plan[1].Traffic[0].Direction, plan[1].Traffic[0].Duration)
	}
	if bg := plan[2].Traffic[0]; bg.Kind != traffic.Background || bg.Rate != 1e6 || bg.Validate() != nil {
		t.Errorf("background flow %+v", bg)
	}
	if tcp := s.Plan(runs[0].Variant); tcp[0].Traffic[0].Protocol != traffic.TCP || tcp[1].Traffic[0].Protocol != traffic.TCP {
		t.Errorf("pm=tcp: the flows are over %s", tcp[0].Traffic[0].Protocol)
	}

	// The variant's path manager goes to the client (the flows' from)
	// only, and the scenario's topology stays as it was.
	top := s.TopologyFor(sub3)
	for _, n := range top.Nodes {
		switch n.Name {
		case "client":
			if n.PM.Policy != pm.PolicySubflows || n.PM.Subflows != 3 {
				t.Errorf("client's pm %+v, want subflows 3", n.PM)
			}
		case "server":
			if n.PM.Policy != pm.PolicyDefault {
				t.Errorf("server's pm %+v, want the topology's default", n.PM)
			}
		}
	}
	if s.Topo.Nodes[0].PM.Policy != pm.PolicyAMPTCP || top.Name != "demo-exp" || s.Topo.Name != "demo" {
		t.Errorf("TopologyFor changed the scenario's topology: %+v, name %s", s.Topo.Nodes[0].PM, s.Topo.Name)
	}
	if evs := s.Events(runs[1].Variant); len(evs) != 2 || evs[0].Link != "xtra-core" || evs[0].At.Duration != 3*time.Second || evs[1].Action != "up" {
		t.Errorf("core-flap events %+v", evs)
	}
	if evs := s.Events(runs[0].Variant); len(evs) != 0 {
		t.Errorf("failure=none: %d events", len(evs))
	}
}

// TestNoDimensions: a scenario without variants has one run per
// repetition, with the topology's timeline.
func TestNoDimensions(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	s, err := Parse([]byte("topology: lab.yaml\nrepetitions: 2\nflows: [{name: f, from: client, to: server, kind: transfer, size: 1MiB, cc: reno}]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	if len(runs) != 2 || runs[1].Repetition != 2 || runs[0].Variant.String() != "default" || len(runs[0].Variant.Map()) != 0 {
		t.Errorf("runs %+v", runs)
	}
	if len(s.Events(nil)) != 4 || s.Name != "demo" {
		t.Errorf("%d events (want the topology's 4), name %q", len(s.Events(nil)), s.Name)
	}
	if p := s.Plan(nil); p[0].Traffic[0].Bytes != 1<<20 || p[0].Traffic[0].ID != "f" || p[0].Traffic[0].CongestionControl != "reno" {
		t.Errorf("plan %+v", p[0].Traffic)
	}
}

// TestFidelitySetting: the emulation's fidelity is measured unless the
// scenario says fidelity: false.
func TestFidelitySetting(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	const flows = "topology: lab.yaml\nflows: [{name: f, from: client, to: server, kind: transfer, size: 1MiB, cc: reno}]\n"
	for doc, want := range map[string]bool{flows: true, flows + "fidelity: true\n": true, flows + "fidelity: false\n": false} {
		s, err := Parse([]byte(doc), dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.MeasuresFidelity() != want {
			t.Errorf("%q: measures fidelity %v, want %v", doc, s.MeasuresFidelity(), want)
		}
	}
}

// TestErrors: every problem at once, each named by its path.
func TestErrors(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	bad := `name: Bad_Name
topology: lab.yaml
repetitions: -1
sizes: {first: 256KiB, step: lots, count: 0}
flows:
  - {name: a, from: client, to: nobody, kind: transfer, cc: cubic}
  - {name: a, from: client, to: server, kind: saturated}
  - {name: c, from: xtra, to: server, kind: background, rate: fast, duration: 1s, cc: reno}
  - {name: d, from: client, to: client, kind: teleport}
  - {name: e, from: client, to: server, kind: transfer, size: 1MiB, direction: sideways, protocol: sctp, cc: "cubic!"}
variants:
  pm: [amptcp, subflows 0, magic]
  failure: [none, nope, cut]
  colour: [red]
failures:
  cut:
    - {at: 1s, link: nowhere, action: down}
`
	_, err := Parse([]byte(bad), dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`name: "Bad_Name" is not a name`,
		"repetitions: need at least 1",
		`sizes.step: "lots" is not a size`,
		"sizes.count: need 1 to 1000, have 0",
		`flows[0].to: "nobody" is not a host`,
		`flows[1].name: "a" is the name of another flow`,
		"flows[1].duration: a saturated flow needs a positive duration",
		"flows[1].cc: missing",
		`flows[2].from: "xtra" is not a host`,
		`flows[2].rate: "fast" is not a rate`,
		"flows[2].kind: a background flow (UDP)",
		"flows[3].to: the flow's two ends are the same host",
		`flows[3].kind: "teleport" is not one of`,
		`flows[4].direction: "sideways"`,
		`flows[4].protocol: "sctp"`,
		`flows[4].cc: "cubic!" is not a congestion control name`,
		`variants.pm[1]: "subflows 0": the number of subflows is 1 to 9`,
		`variants.pm[2]: "magic" is not one of`,
		`variants.failure[1]: "nope" is none, timeline or a name of failures (cut)`,
		"variants.colour: unknown dimension",
		"failures.cut[0].link:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}

	// Strict decoding: an unknown field is an error, in a series too.
	for _, doc := range []string{
		"topology: lab.yaml\nflow: []\n",
		"topology: lab.yaml\nsizes: {first: 1MiB, stop: 2MiB}\nflows: []\n",
	} {
		if _, err := Parse([]byte(doc), dir); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%q: %v, want an unknown field", doc, err)
		}
	}
	if _, err := Parse([]byte("flows: []\n"), dir); err == nil || !strings.Contains(err.Error(), "topology: missing") {
		t.Errorf("no topology: %v", err)
	}
}

func TestSizes(t *testing.T) {
	z := Sizes{List: []string{"1MiB", "4KiB"}}
	if got, errs := z.Bytes(); len(errs) != 0 || !slices.Equal(got, []int64{1 << 20, 4 << 10}) {
		t.Errorf("list %v %v", got, errs)
	}
}

func TestParsePM(t *testing.T) {
	for in, want := range map[string]PMSetting{
		"amptcp": {Policy: pm.PolicyAMPTCP}, "default": {Policy: pm.PolicyDefault}, "fullmesh": {Policy: pm.PolicyFullmesh},
		"subflows 3": {Policy: pm.PolicySubflows, Subflows: 3}, "ndiffports 2": {Policy: pm.PolicyNdiffports, Subflows: 2},
		"tcp": {Policy: pm.PolicyDefault, TCP: true}, "subflows 2 backup": {Policy: pm.PolicySubflows, Subflows: 2, Backup: true},
	} {
		if got, err := ParsePM(in); err != nil || got != want {
			t.Errorf("ParsePM(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "subflows", "subflows x", "subflows 10", "amptcp 2", "kernel", "tcp backup", "backup"} {
		if _, err := ParsePM(in); err == nil {
			t.Errorf("ParsePM(%q): no error", in)
		}
	}
}

// amptcp's coupled congestion controls may be named short in a
// scenario: the flows get the kernel's names, and the lab loads those.
func TestCoupledCongestionControlNames(t *testing.T) {
	s, err := Parse([]byte(`name: c
topology: lab.yaml
flows:
  - {name: f, from: client, to: server, kind: saturated, duration: 10s}
  - {name: g, from: client, to: server, kind: saturated, duration: 10s, cc: olia}
variants:
  cc: [lia, amp_balia, cubic]
repetitions: 1
`), filepath.Dir(docFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range s.Variants.Matrix() {
		got = append(got, s.Plan(v)[0].Traffic[0].CongestionControl)
	}
	if !slices.Equal(got, []string{"amp_lia", "amp_balia", "cubic"}) {
		t.Errorf("the flows' congestion controls are %v, want amp_lia amp_balia cubic", got)
	}
	if all := s.CongestionControls(); !slices.Equal(all, []string{"amp_lia", "amp_balia", "cubic"}) {
		t.Errorf("CongestionControls() = %v", all)
	}
}

// docs/scenarios/backup.yaml loads, and its second variant turns the
// backup policy on for the client only.
func TestBackupScenario(t *testing.T) {
	s, err := Load("../../docs/scenarios/backup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Variants.Matrix()
	if len(m) != 2 {
		t.Fatalf("%d variants, want 2", len(m))
	}
	for i, v := range m {
		for _, n := range s.TopologyFor(v).Nodes {
			want := i == 1 && n.Name == "client"
			if got := n.PM != nil && n.PM.Backup.Enabled; got != want {
				t.Errorf("variant %s, node %s: backup %v", v, n.Name, got)
			}
		}
	}
}
