package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// upTE builds the te role's lab topology of docs/scenarios, renamed for
// this run, and returns its state and plan.
func upTE(t *testing.T, file, suffix string) (*State, *topo.Plan, Options) {
	t.Helper()
	testenv.RequireRoot(t)
	text, err := os.ReadFile(filepath.Join("../docs/scenarios", file))
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Prefix + "-" + suffix
	top, err := topo.Parse(fmt.Appendf(nil, "%s\nname: %s\n", strings.Replace(string(text), "\nname: ", "\n# name: ", 1), name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), file)
	opts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, opts)
	st, err := Up(context.Background(), top, path, opts)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	plan, err := topo.Compile(top, st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, plan, opts
}

// nodeStatus is what `lispd status` says of a node.
func nodeStatus(t *testing.T, st *State, node string) *daemon.Status {
	t.Helper()
	return lispdStatus(t, processOf(t, st, node, "lispd"))
}

func waitUntil(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
	}
}

// askAs is what a host of the client's site gets from the map-resolver
// for the server's EID: amptcp lig run in the client's namespace.
func askAs(t *testing.T, st *State, plan *topo.Plan, host, eid string) *lisp.MapRecord {
	t.Helper()
	var res *lig.Result
	err := (&netns.NS{Name: st.Prefix + host}).Do(func() (err error) {
		ms := plan.Node("ms").Interfaces[0].Address.Addr()
		res, err = lig.Query(context.Background(), netip.MustParseAddr(eid), lig.Options{
			Resolver: netip.AddrPortFrom(ms, lig.Port), IID: 1000, HasIID: true, Timeout: time.Second})
		return err
	})
	if err != nil || len(res.Reply.Records) != 1 {
		t.Fatalf("lig %s from %s: %v %+v", eid, host, err, res)
	}
	return &res.Reply.Records[0]
}

// elps lists a record's usable ELPs as RTR names, in order.
func elps(rec *lisp.MapRecord, plan *topo.Plan) []string {
	byAddr := map[netip.Addr]string{}
	for _, n := range plan.Nodes {
		for _, i := range n.Interfaces {
			byAddr[i.Address.Addr()] = n.Name
		}
	}
	var out []string
	for _, l := range rec.Locators {
		if l.Priority == 255 {
			continue
		}
		var hops []string
		if elp, ok := l.Address.LCAF().(*lisp.ELP); ok {
			for _, h := range elp.Hops {
				hops = append(hops, byAddr[h.Address.IP()])
			}
		}
		out = append(out, strings.Join(hops, ">"))
	}
	return out
}

// pairOf is the te role's set of a pair.
func pairOf(te *pce.Status, src, dst string) (pce.PairStatus, bool) {
	for _, p := range te.Pairs {
		if p.Source == src && p.Destination == dst {
			return p, true
		}
	}
	return pce.PairStatus{}, false
}

// settle is how long the least RTTs of the last half minute take to
// follow a rise of the delays.
const settle = 31 * time.Second

// matrixOf is the te role's RTT matrix: the least RTT of the last half
// minute each node measures of each other (what the graph weighs), in
// ms, by (from, to) node; the xTRs are named after their sites' nodes
// here.
func matrixOf(t *testing.T, st *State) map[[2]string]float64 {
	t.Helper()
	site := map[string]string{"a": "xs", "b": "xd"}
	out := map[[2]string]float64{}
	for _, l := range nodeStatus(t, st, "ms").TE.Matrix {
		if l.Up && l.MinRTT > 0 && l.To != "" {
			out[[2]string{cmp.Or(site[l.From], l.From), cmp.Or(site[l.To], l.To)}] = l.MinRTT
		}
	}
	return out
}

// TestTEPaperOverlay runs [LISP-TE]'s overlay in the lab with the te
// role (docs/scenarios/te-paper-topology.yaml): the RTT matrix matches
// the emulated delays; a host gets the three ELPs of close RTTs in order
// and not the slow fourth; an MPTCP connection planned from them gets
// three subflows, one on each; and when an RTR fails, its subflow moves
// within the probing's detection time and the set changes once.
func TestTEPaperOverlay(t *testing.T) {
	st, plan, opts := upTE(t, "te-paper-topology.yaml", "tepaper")
	// One-way delay of each node's link to the core router, in ms.
	delay := map[string]float64{"xs": 2, "xd": 2, "r1": 18, "r2": 19, "r3": 20.5, "r4": 73}

	t.Run("RTT matrix", func(t *testing.T) {
		// After a few probe intervals every link of the overlay is
		// measured: within 10 % and 0.5 ms of twice the delays on the
		// way, on top of what the same probes take with the delays at
		// zero (the stacks, the emulator, lispd: 0.5 to 5 ms here, as
		// the machine is busy).
		waitUntil(t, "the 16 links of the overlay", 30*time.Second, func() bool {
			return len(matrixOf(t, st)) == 16
		})
		time.Sleep(2 * time.Second) // 10 probes of every link
		measured := matrixOf(t, st)
		links, err := OpenLinks(st.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		setDelays := func(zero bool) {
			for _, l := range plan.Links {
				if p, ok := linkParams(plan, l.Name); ok && p.Delay > 0 {
					d := p.Delay
					if zero {
						d = 0
					}
					if err := links.Apply(topo.Event{Link: l.Name, Action: topo.ActionSet, Delay: d.String()}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		setDelays(true)
		time.Sleep(2 * time.Second) // a lower RTT is the least at once
		base := matrixOf(t, st)
		setDelays(false)
		worst, baseMax := 0.0, 0.0
		for k, rtt := range measured {
			want := 2 * (delay[k[0]] + delay[k[1]])
			got := rtt - base[k]
			worst, baseMax = max(worst, math.Abs(got-want)/want), max(baseMax, base[k])
			if math.Abs(got-want) > 0.1*want+0.5 {
				t.Errorf("%s -> %s: %.2f ms (%.2f ms less %.2f ms with no delay), want %.1f ms ± 10 %% + 0.5 ms",
					k[0], k[1], got, rtt, base[k], want)
			}
		}
		t.Logf("16 links within %.1f %% of twice their delays; %.2f ms at most with no delay", 100*worst, baseMax)
		time.Sleep(settle) // a higher one when the lower ones are forgotten
	})

	t.Run("the set", func(t *testing.T) {
		rec := askAs(t, st, plan, "client", "10.2.0.2")
		if got := elps(rec, plan); !slices.Equal(got, []string{"r1>xd", "r2>xd", "r3>xd"}) {
			t.Fatalf("the client's site gets %v, want r1, r2, r3 by RTT", got)
		}
		p, ok := pairOf(nodeStatus(t, st, "ms").TE, "a", "b")
		if !ok || len(p.ELPs) != 3 || !slices.ContainsFunc(p.Excluded, func(x string) bool { return strings.HasPrefix(x, "a > r4 > b: rule 1") }) {
			t.Errorf("pair a -> b: %+v", p)
		}
	})

	t.Run("three subflows, one on each ELP", func(t *testing.T) {
		client, server := st.Prefix+"client", st.Prefix+"server"
		if err := warmPair(context.Background(), client, server, netip.Addr{}, nextWarmPorts(), "10.2.0.2:5201"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- transfer(client, server, "10.2.0.2:5201", 32<<20, true) }()
		// The subflows as xs binds them while the transfer runs: on a
		// busy machine a join may come late, and the table forgets the
		// subflows once they end.
		paths := func() (map[uint64][]int, bool) {
			byConn := map[uint64][]int{}
			for _, s := range nodeStatus(t, st, "xs").Dataplane.Subflows {
				if s.Remote == "10.2.0.2:5201" {
					byConn[s.Connection] = append(byConn[s.Connection], s.Path)
				}
			}
			for _, p := range byConn {
				slices.Sort(p)
			}
			return byConn, len(byConn) == 1 && slices.Equal(slices.Collect(maps.Values(byConn))[0], []int{0, 1, 2})
		}
		byConn, ok := paths()
		for ended := false; !ok && !ended; byConn, ok = paths() {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				ended, done = true, nil
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !ok {
			t.Errorf("the connection's subflows took paths %v, want 0, 1 and 2", byConn)
		}
		if done != nil {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []string{"r1", "r2", "r3"} {
			if n := nodeStatus(t, st, r).Dataplane.Counters["rtr_reencapsulated"]; n < 100 {
				t.Errorf("%s re-encapsulated %d packets", r, n)
			}
		}
		if n := nodeStatus(t, st, "r4").Dataplane.Counters["rtr_reencapsulated"]; n != 0 {
			t.Errorf("r4, on no ELP, re-encapsulated %d packets", n)
		}
	})

	t.Run("a failed RTR", func(t *testing.T) {
		client, server := st.Prefix+"client", st.Prefix+"server"
		before := nodeStatus(t, st, "xs").Dataplane.Counters["subflow_rebound"]
		pair, _ := pairOf(nodeStatus(t, st, "ms").TE, "a", "b")
		changes := pair.Changes
		done := make(chan error, 1)
		go func() { done <- transfer(client, server, "10.2.0.2:5201", 48<<20, true) }()
		time.Sleep(2 * time.Second)
		// The RTR to fail is one that a subflow of this transfer goes
		// through: on a busy machine a join may have been bound to a path
		// another subflow of its connection has.
		byAddr := map[string]string{}
		for _, n := range plan.Nodes {
			for _, i := range n.Interfaces {
				byAddr[i.Address.Addr().String()] = n.Name
			}
		}
		// through lists the RTRs of xs's usable paths to site b, by path.
		through := func(xs *daemon.Status) map[int]string {
			out := map[int]string{}
			for _, e := range xs.MapCache {
				if e.EIDPrefix != "10.2.0.0/24" {
					continue
				}
				for i, p := range e.Paths {
					if p.Priority != 255 && len(p.Hops) > 0 {
						out[i] = byAddr[p.Hops[0].Address]
					}
				}
			}
			return out
		}
		var rtr, local string
		var path int
		waitUntil(t, "a subflow of the transfer on an ELP", 30*time.Second, func() bool {
			xs := nodeStatus(t, st, "xs")
			for _, sf := range xs.Dataplane.Subflows {
				if sf.Remote == "10.2.0.2:5201" && !sf.Closing && through(xs)[sf.Path] != "" {
					rtr, local, path = through(xs)[sf.Path], sf.Local, sf.Path
					return true
				}
			}
			return false
		})
		links, err := OpenLinks(st.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		failed := time.Now()
		if err := links.Apply(topo.Event{Link: rtr + "-core", Action: topo.ActionDown}); err != nil {
			t.Fatal(err)
		}
		// xs finds the RTR down when 3 probes of 200 ms go unanswered,
		// and from then on sends none of the subflow's packets through
		// it: it moves the subflow with its next packet. Idle, that is
		// well under a second after the failure (docs/te.md measures it).
		// On a loaded machine the detection is late, and the subflow's
		// next packet may come much later (a retransmission whose timer
		// backed off), or never if the others carried the rest: what
		// holds is that nothing goes through the RTR once found down (a
		// second after the prober's verdict: lispd then updates the data
		// plane's map).
		var down time.Time
		waitUntil(t, "xs to find "+rtr+" down", 30*time.Second, func() bool {
			for _, l := range nodeStatus(t, st, "xs").Probes {
				if byAddr[l.Address] == rtr && !l.Up {
					down = l.Since
					return true
				}
			}
			return false
		})
		t.Logf("xs found %s down %s after its failure", rtr, down.Sub(failed).Round(10*time.Millisecond))
		moved := false
		waitUntil(t, "the subflow on "+rtr+" to move or the transfer to end", 60*time.Second, func() bool {
			xs := nodeStatus(t, st, "xs")
			for _, sf := range xs.Dataplane.Subflows {
				if sf.Local == local && sf.Path == path && sf.LastSeen.After(down.Add(time.Second)) {
					t.Fatalf("xs sent the subflow's packets through %s, found down %s before: %+v", rtr, sf.LastSeen.Sub(down), sf)
				}
			}
			moved = xs.Dataplane.Counters["subflow_rebound"] > before
			return moved || len(done) > 0
		})
		t.Logf("the subflow moved: %v (%s after the failure)", moved, time.Since(failed).Round(10*time.Millisecond))
		if err := <-done; err != nil {
			// A server that completes the handshake with a segment
			// without MP_CAPABLE (its third ACK and first data lost or
			// overtaken) falls back to TCP, as the kernel does; it
			// happened on a busy machine, once in a few runs. Any other
			// fallback, or data lost, fails.
			cc, _ := nsMPTCPCounters(client)
			sc, _ := nsMPTCPCounters(server)
			if errors.Is(err, errFellBack) && sc["MPCapableFallbackACK"] > 0 {
				t.Logf("the transfer across the failure: %v at its handshake (MPTCP counters: client %v; server %v)", err, cc, sc)
			} else {
				t.Errorf("the transfer across the failure: %v (MPTCP counters: client %v; server %v)", err, cc, sc)
			}
		}
		// The set changes once, for the failure, naming the RTR, and keeps
		// the two others. On a busy machine a probe answered late can
		// take another RTR out for a while (an ELP out and back): what
		// must hold then is the set it settles on.
		var others, want []string
		for _, r := range []string{"r1", "r2", "r3"} {
			if r != rtr {
				others, want = append(others, r), append(want, r+">xd")
			}
		}
		rtrsOf := func(p pce.PairStatus) []string {
			var out []string
			for _, e := range p.ELPs {
				out = append(out, e.Nodes[1:len(e.Nodes)-1]...)
			}
			slices.Sort(out)
			return out
		}
		var p pce.PairStatus
		for deadline := time.Now().Add(60 * time.Second); p.Changes <= changes || !slices.Equal(rtrsOf(p), others); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the set is not %v a minute after %s failed: %+v", others, rtr, p)
			}
			p, _ = pairOf(nodeStatus(t, st, "ms").TE, "a", "b")
		}
		if p.Changes == changes+1 && !strings.Contains(p.Reason, rtr) {
			t.Errorf("pair a -> b changed for %q, not for %s", p.Reason, rtr)
		} else if p.Changes > changes+1 {
			t.Logf("the set changed %d times after %s failed, the last for %q", p.Changes-changes, rtr, p.Reason)
		}
		// The map-resolver answers with the set (the client's site is
		// solicited when it changes).
		var got []string
		for deadline := time.Now().Add(30 * time.Second); !slices.Equal(got, want); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the client's site gets %v after %s failed, want %v", got, rtr, want)
			}
			got = elps(askAs(t, st, plan, "client", "10.2.0.2"), plan)
		}
	})
}

// TestTEDisjoint: with previous-hop identification the te role offers
// the two link-disjoint ELPs (docs/scenarios/te-disjoint-topology.yaml),
// and an MPTCP connection's two subflows each cross only their ELP's
// RTRs, which never find a packet ambiguous.
func TestTEDisjoint(t *testing.T) {
	st, plan, _ := upTE(t, "te-disjoint-topology.yaml", "tedisj")
	waitUntil(t, "the overlay's 7 links", 30*time.Second, func() bool {
		return nodeStatus(t, st, "ms").TE.Edges == 7
	})
	time.Sleep(2 * time.Second) // a few more probes of every link
	// The two ELPs cost the same: either may come first.
	rec := askAs(t, st, plan, "client", "10.2.0.2")
	got := elps(rec, plan)
	if slices.Sort(got); !slices.Equal(got, []string{"r1>r4>xd", "r2>r3>xd"}) {
		t.Fatalf("the client's site gets %v, want r2>r3>xd and r1>r4>xd", got)
	}
	p, _ := pairOf(nodeStatus(t, st, "ms").TE, "a", "b")
	if !slices.Contains(p.Excluded, "a > r1 > r3 > b: not in the best set") {
		t.Errorf("pair a -> b: %+v", p)
	}
	// Each RTR carries packets of its own ELP's slot only.
	slot := map[string]int{}
	for _, e := range p.ELPs {
		for _, n := range e.Nodes[1 : len(e.Nodes)-1] {
			slot[n] = e.PathID - 1
		}
	}
	client, server := st.Prefix+"client", st.Prefix+"server"
	if err := warmPair(context.Background(), client, server, netip.Addr{}, nextWarmPorts(), "10.2.0.2:5201"); err != nil {
		t.Fatal(err)
	}
	if err := transfer(client, server, "10.2.0.2:5201", 8<<20, true); err != nil {
		t.Fatal(err)
	}
	if len(slot) != 4 {
		t.Fatalf("the ELPs' RTRs: %v", slot)
	}
	for r, own := range slot {
		c := nodeStatus(t, st, r).Dataplane.Counters
		if c["rtr_ambiguous"] != 0 {
			t.Errorf("%s found %d packets ambiguous", r, c["rtr_ambiguous"])
		}
		if n := c[fmt.Sprintf("rtr_path%d_packets", own)]; n < 100 {
			t.Errorf("%s carried %d packets of its ELP", r, n)
		}
		if n := c[fmt.Sprintf("rtr_path%d_packets", 1-own)]; n != 0 {
			t.Errorf("%s carried %d packets of the other ELP", r, n)
		}
	}
}
