package scenario

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/lab/traffic"
)

// An all-to-all flow (between) is planned as one flow per ordered pair
// of its hosts, named as lab/traffic's AllToAll names them, each with
// its own server port after the flows before it; its hosts that send
// stream flows get the variant's path manager.
func TestAllToAll(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	s, err := Parse([]byte(`topology: lab.yaml
flows:
  - {name: files, from: client, to: server, kind: transfer, size: 1MiB, cc: cubic}
  - {name: mesh, between: [client, server], kind: saturated, duration: 5s, cc: reno, at: 1s}
variants:
  pm: [fullmesh]
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Runs()[0].Variant
	plan := s.Plan(v)
	var got []string
	for _, p := range plan {
		got = append(got, p.Name+" "+p.From+">"+p.To)
	}
	want := "files client>server, mesh/client>server client>server, mesh/server>client server>client"
	if strings.Join(got, ", ") != want {
		t.Fatalf("planned %q, want %q", strings.Join(got, ", "), want)
	}
	for i, p := range plan {
		if p.Port != BasePort+i {
			t.Errorf("flow %s on port %d, want %d", p.Name, p.Port, BasePort+i)
		}
	}
	if f := plan[2].Traffic; len(f) != 1 || f[0].ID != "mesh/server>client" || f[0].Kind != traffic.Saturate ||
		f[0].CongestionControl != "reno" || plan[2].At.Duration.Seconds() != 1 {
		t.Errorf("mesh/server>client: %+v at %v", f, plan[2].At)
	}
	for _, n := range s.TopologyFor(v).Nodes {
		if (n.Name == "client" || n.Name == "server") && (n.PM == nil || n.PM.Policy != "fullmesh") {
			t.Errorf("%s's pm %+v, want the variant's fullmesh", n.Name, n.PM)
		}
	}
}

func TestAllToAllErrors(t *testing.T) {
	dir := filepath.Dir(docFiles(t))
	_, err := Parse([]byte(`topology: lab.yaml
flows:
  - {name: a, between: [client, client, xtra], kind: background, rate: 1Mbit, duration: 1s}
  - {name: b, from: client, between: [client, server], kind: background, rate: 1Mbit, duration: 1s}
  - {name: c, between: [server], kind: background, rate: 1Mbit, duration: 1s}
`), dir)
	if err == nil {
		t.Fatal("bad all-to-all flows accepted")
	}
	for _, want := range []string{
		`flows[0].between[1]: "client" is there twice`,
		`flows[0].between[2]: "xtra" is not a host of the topology`,
		"flows[1].between: an all-to-all flow has between, not from and to",
		"flows[2].between: needs at least two hosts",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
