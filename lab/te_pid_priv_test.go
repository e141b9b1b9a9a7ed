package lab

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lisp"
)

// sharedTopology has two source sites whose overlay links reach the
// destination through RTRs they share: site a1's xTR s1 probes r1 and
// r2, site a2's s2 probes r2 and r3 (te.peers), so that s1's set is
// through r1 and r2, s2's through r2 and r3.
const sharedTopology = `
instance-id: 1000
lispd: {probe-interval: 200ms}
te:
  collect-interval: 500ms
  interval: 5s
  peers: [[s1, r1], [s1, r2], [s2, r2], [s2, r3], [r1, xd], [r2, xd], [r3, xd]]
nodes:
  - {name: c1, role: host, pm: {policy: amptcp}}
  - {name: c2, role: host, pm: {policy: amptcp}}
  - {name: server, role: host, pm: {policy: default}}
  - {name: s1, role: xtr, site: a1}
  - {name: s2, role: xtr, site: a2}
  - {name: xd, role: xtr, site: b}
  - {name: r1, role: rtr}
  - {name: r2, role: rtr}
  - {name: r3, role: rtr}
  - {name: core, role: router}
  - {name: ms, role: ms}
sites: [{name: a1}, {name: a2}, {name: b}]
links:
  - {ends: [c1, s1]}
  - {ends: [c2, s2]}
  - {ends: [server, xd]}
  - {ends: [s1, core], delay: 1ms}
  - {ends: [s2, core], delay: 1ms}
  - {ends: [xd, core], delay: 1ms}
  - {ends: [r1, core], delay: 5ms}
  - {ends: [r2, core], delay: 6ms}
  - {ends: [r3, core], delay: 7ms}
  - {ends: [core, ms]}
`

// upText brings up a topology given as text, named for this run.
func upText(t *testing.T, text, suffix string) (*State, *topo.Plan) {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-" + suffix
	top, err := topo.Parse([]byte("name: " + name + "\n" + text))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, opts)
	st, err := Up(context.Background(), top, filepath.Join(t.TempDir(), suffix+".yaml"), opts)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	plan, err := topo.Compile(top, st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, plan
}

// slotsAsked is the record a node gets for eid from the map-resolver,
// as its locators in order: each ELP's RTRs and its priority.
func slotsAsked(t *testing.T, st *State, plan *topo.Plan, node, eid string) []string {
	t.Helper()
	byAddr := map[netip.Addr]string{}
	for _, n := range plan.Nodes {
		for _, i := range n.Interfaces {
			byAddr[i.Address.Addr()] = n.Name
		}
	}
	var out []string
	for _, l := range askAs(t, st, plan, node, eid).Locators {
		var hops []string
		if elp, ok := l.Address.LCAF().(*lisp.ELP); ok {
			for _, h := range elp.Hops[:len(elp.Hops)-1] {
				hops = append(hops, byAddr[h.Address.IP()])
			}
		}
		out = append(out, fmt.Sprintf("%s/%d", strings.Join(hops, ">"), l.Priority))
	}
	return out
}

// TestTESharedRTRs: two sources whose sets share an RTR see the
// destination's ELPs in the same slots, each its own usable and the
// other's at priority 255, and RTRs see them all there: a path ID names
// the same ELP at every router. Each source's MPTCP subflows go on its
// own ELPs, and each RTR carries the packets of its own slot only, the
// shared one those of both sources.
func TestTESharedRTRs(t *testing.T) {
	st, plan := upText(t, sharedTopology, "teshared")
	waitUntil(t, "the overlay's 7 links", 30*time.Second, func() bool {
		return nodeStatus(t, st, "ms").TE.Edges == 7
	})
	time.Sleep(2 * time.Second) // a few more probes of every link
	server := plan.Node("server").Interfaces[0].Address.Addr().String()

	// s1's site asks first: its ELPs take the first slots; s2's ELP
	// through r2 is in one of them already, r3's takes the next.
	if first := slotsAsked(t, st, plan, "c1", server); !slices.Equal(first, []string{"r1/1", "r2/1"}) {
		t.Fatalf("site a1 gets %v first, want r1 and r2", first)
	}
	two := slotsAsked(t, st, plan, "c2", server)
	one := slotsAsked(t, st, plan, "c1", server)
	rtr := slotsAsked(t, st, plan, "r2", server)
	if len(one) != 3 || !slices.Equal(one[:2], []string{"r1/1", "r2/1"}) || one[2] != "r3/255" {
		t.Fatalf("site a1 gets %v, want r1 and r2 usable, then r3's slot at 255", one)
	}
	if !slices.Equal(two, []string{"r1/255", "r2/1", "r3/1"}) {
		t.Errorf("site a2 gets %v, want the same slots, r1's at 255", two)
	}
	if !slices.Equal(rtr, []string{"r1/1", "r2/1", "r3/1"}) {
		t.Errorf("an RTR gets %v, want every slot usable", rtr)
	}
	slot := map[string]int{"r1": 0, "r2": 1, "r3": 2}

	for _, c := range []string{"c1", "c2"} {
		client := st.Prefix + c
		addr := server + ":5201"
		if err := warmPair(context.Background(), client, st.Prefix+"server", netip.Addr{}, nextWarmPorts(), addr); err != nil {
			t.Fatal(err)
		}
		if err := transfer(client, st.Prefix+"server", addr, 8<<20, true); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	for xtr, want := range map[string][]int{"s1": {0, 1}, "s2": {1, 2}} {
		var paths []int
		for _, s := range nodeStatus(t, st, xtr).Dataplane.Subflows {
			if strings.HasPrefix(s.Remote, server+":") {
				paths = append(paths, s.Path)
			}
		}
		slices.Sort(paths)
		if !slices.Equal(slices.Compact(paths), want) {
			t.Errorf("%s's subflows took paths %v, want %v", xtr, paths, want)
		}
	}
	for r, own := range slot {
		c := nodeStatus(t, st, r).Dataplane.Counters
		for i := range 3 {
			n := c[fmt.Sprintf("rtr_path%d_packets", i)]
			switch {
			case i == own && n < 100:
				t.Errorf("%s carried %d packets of its slot %d", r, n, i)
			case i != own && n != 0:
				t.Errorf("%s carried %d packets of slot %d, not its own", r, n, i)
			}
		}
	}
}
