package pm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/mapping"
)

// binder asks for its own site's mapping only, then opens a subflow per
// gateway on the first subflow's address pair, each with a port sum of
// its own modulo the number of gateways.
func TestBinderFollowsTheLocalGateways(t *testing.T) {
	te := newTestEngine(t, `
policy: binder
amptcp: {map-resolver: 10.0.100.2}
`)
	te.connect(1)
	if len(te.lookups) != 1 || te.lookups[0].EID != clientAddr.Addr() || !te.lookups[0].Local {
		t.Fatalf("lookups %v, want the local EID only", te.lookups)
	}
	te.noCreates("before the mapping system answered")
	three := Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/24")), TTL: 5 * time.Minute, RLOCs: 3}
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, three, time.Millisecond, nil)
	cs := te.k.created()
	if len(cs) != 2 {
		t.Fatalf("created %v, want 2 more subflows (3 gateways)", cs)
	}
	residues := map[int]bool{sum(clientAddr, serverAddr) % 3: true}
	for _, c := range cs {
		if c.local.IP != clientAddr.Addr() || c.remote != serverAddr {
			t.Errorf("subflow %v: not on the first subflow's address pair", c)
		}
		residues[sum(localOf(c), c.remote)%3] = true
	}
	if len(residues) != 3 {
		t.Errorf("port sums modulo 3: %v, want each gateway once", residues)
	}
	if p := te.conns[1].plan; p.Policy != PolicyBinder || p.N != 3 || p.P != 3 {
		t.Errorf("plan %+v", p)
	}
}

// Without a mapping system binder knows no gateway: its subflows share
// the first path, with no lookup.
func TestBinderWithoutAMappingSystem(t *testing.T) {
	te := newTestEngine(t, "policy: binder\nsubflows: 2\n")
	te.connect(1)
	if len(te.lookups) != 0 {
		t.Errorf("lookups %v without a map-resolver", te.lookups)
	}
	if cs := te.k.created(); len(cs) != 1 || cs[0].local.IP != clientAddr.Addr() || cs[0].remote != serverAddr {
		t.Errorf("created %v, want one more subflow on the first address pair", cs)
	}
}
