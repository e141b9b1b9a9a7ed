package scenario

import (
	"testing"

	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// TestDemoScenario loads `make demo`'s scenario as it is and checks what
// docs/lab.md ("Demo") says of it: [A-MPTCP]'s four variants twice with
// cubic, a small transfer and then six files uploaded; a data centre
// whose xTR registers two RLOCs and a client site with one, both xTRs
// steering by the port sum, the client's pm on the amptcp policy.
func TestDemoScenario(t *testing.T) {
	s, err := Load("../../docs/scenarios/cloud-access.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs := s.Runs()
	if len(runs) != 8 || runs[2].Variant.String() != "pm=amptcp cc=cubic" || runs[7].Variant.String() != "pm=subflows 3 cc=cubic" {
		t.Fatalf("%d runs, run 3 %v: want 4 pm x cubic x 2 repetitions, amptcp third", len(runs), runs[2].Variant)
	}
	plan := s.Plan(runs[2].Variant)
	if len(plan) != 2 || len(plan[0].Traffic) != 1 || len(plan[1].Traffic) != 6 {
		t.Fatalf("flows %+v: want the prime transfer and 6 files", plan)
	}
	for _, p := range plan {
		for _, f := range p.Traffic {
			if f.Direction != traffic.Download || f.Protocol != traffic.MPTCP || f.CongestionControl != "cubic" {
				t.Errorf("flow %s: %+v, want an MPTCP download with cubic", f.ID, f)
			}
		}
	}
	if f := plan[1].Traffic; f[0].Bytes != 256<<10 || f[5].Bytes != 4<<20 || plan[1].At.Duration <= 0 {
		t.Errorf("files %d to %d bytes at %v: want 256 KiB to 4 MiB, after the prime", f[0].Bytes, f[5].Bytes, plan[1].At)
	}

	p, err := topo.Compile(s.TopologyFor(runs[2].Variant), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.Site("a"), p.Site("b"); len(a.Locators) != 1 || len(b.Locators) != 2 {
		t.Errorf("site a registers %d locators, site b %d: want 1 and 2", len(a.Locators), len(b.Locators))
	}
	for _, x := range []string{"xtra", "xtrb"} {
		if dp := p.Node(x).Lispd.Dataplane; dp == nil || dp.PathSelection != "port-sum" || dp.MPTCPSubflows != "off" {
			t.Errorf("%s's data plane: %+v, want port-sum and mptcp-subflows off", x, dp)
		}
	}
	if pm := p.Node("client").PM; pm == nil || pm.Policy != "amptcp" {
		t.Errorf("client's pm: %+v, want the amptcp policy", pm)
	}
	if pm := p.Node("server").PM; pm == nil || pm.Policy != "default" {
		t.Errorf("server's pm: %+v, want the default policy, listening for joins", pm)
	}
}
