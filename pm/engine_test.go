package pm

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/mptcp"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Nothing is opened on CREATED: the kernel refuses joins before the
// connection is established. On ESTABLISHED, ndiffports opens exactly
// its plan: N-1 subflows on the first one's address pair, each with its
// own port and local ID.
func TestOpensThePlanAfterEstablished(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 3\n")
	te.event(mptcp.Event{Type: mptcp.EventCreated, Token: 1, Local: clientAddr, Remote: serverAddr})
	te.noCreates("on CREATED")
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: 1, Local: clientAddr, Remote: serverAddr})
	cs := te.k.created()
	if len(cs) != 2 {
		t.Fatalf("created %d subflows, want 2: %v", len(cs), cs)
	}
	ids, ports := map[uint8]bool{0: true}, map[uint16]bool{clientAddr.Port(): true}
	for _, c := range cs {
		if c.token != 1 || c.local.IP != clientAddr.Addr() || c.remote != serverAddr {
			t.Errorf("create %+v: want token 1 from %s to %s", c, clientAddr.Addr(), serverAddr)
		}
		if ids[c.local.ID] || ports[c.local.Port] || c.local.Port < 40000 || c.local.Port > 40999 {
			t.Errorf("create %+v: ID or port reused, or port outside the ephemeral range", c)
		}
		ids[c.local.ID], ports[c.local.Port] = true, true
	}
	// A repeated ESTABLISHED changes nothing.
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: 1, Local: clientAddr, Remote: serverAddr})
	te.noCreates("on a repeated ESTABLISHED")
}

// The server side opens nothing; with addresses to announce it announces
// those of the connection's family, IDs from 1 in the configured order.
func TestServerSideAnnouncesOnly(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 3\nannounce: [10.2.1.1, 2001:db8::1, 10.2.2.1]\n")
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: 7, Local: serverAddr, Remote: clientAddr, Server: true})
	te.noCreates("on the server side")
	want := []mptcp.Addr{
		{ID: 1, IP: addr("10.2.1.1"), Flags: mptcp.FlagSignal},
		{ID: 3, IP: addr("10.2.2.1"), Flags: mptcp.FlagSignal},
	}
	if fmt.Sprint(te.k.announces) != fmt.Sprint(want) {
		t.Errorf("announced %v, want %v", te.k.announces, want)
	}
}

// subflows: N spreads the port sums over N residues: every subflow,
// the first included, takes another path of a port-sum xTR.
func TestSubflowsPolicyDistinctResidues(t *testing.T) {
	te := newTestEngine(t, "policy: subflows\nsubflows: 4\n")
	te.connect(1)
	cs := te.k.created()
	if len(cs) != 3 {
		t.Fatalf("created %d, want 3", len(cs))
	}
	seen := map[int]bool{sum(clientAddr, serverAddr) % 4: true}
	for _, c := range cs {
		r := sum(localOf(c), c.remote) % 4
		if seen[r] {
			t.Errorf("residue %d twice: %v", r, cs)
		}
		seen[r] = true
	}
}

// A port the kernel finds in use is replaced by the next with the same
// residue, P further.
func TestPortInUseTriesTheNextCandidate(t *testing.T) {
	te := newTestEngine(t, "policy: subflows\nsubflows: 2\n")
	// rand is 0: the first candidate is the lowest port with the residue.
	first := newPortCandidates(portRange{40000, 40999}, serverAddr.Port(), 2, (sum(clientAddr, serverAddr)+1)%2, 0)
	p, _ := first.get()
	te.k.inUse[p] = true
	te.connect(1)
	cs := te.k.created()
	if len(cs) != 1 || cs[0].local.Port != p+2 {
		t.Fatalf("created %v, want port %d (%d is in use)", cs, p+2, p)
	}
	if te.count.portsInUse != 1 {
		t.Errorf("ports in use counted %d, want 1", te.count.portsInUse)
	}
}

// twoRLOCs is a peer site with two RLOCs, ours has one.
var (
	peerMapping  = Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/24")), TTL: 5 * time.Minute, RLOCs: 2}
	localMapping = Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/24")), TTL: 5 * time.Minute, RLOCs: 1}
)

const amptcpConfig = `
policy: amptcp
amptcp:
  map-resolver: 10.0.100.2
  equation: 2
`

// amptcp asks for both EIDs, then opens L_local·L_remote subflows with
// port sums on distinct paths of the peer's xTR.
func TestAMPTCPFollowsTheMappings(t *testing.T) {
	te := newTestEngine(t, amptcpConfig)
	te.connect(1)
	if len(te.lookups) != 2 {
		t.Fatalf("lookups %v, want the peer's and the local EID", te.lookups)
	}
	te.noCreates("before the mapping system answered")
	te.lookupDone(Query{EID: serverAddr.Addr(), From: clientAddr.Addr()}, peerMapping, time.Millisecond, nil)
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, localMapping, time.Millisecond, nil)
	cs := te.k.created()
	if len(cs) != 1 {
		t.Fatalf("created %v, want 1 subflow (1×2 paths)", cs)
	}
	if sum(localOf(cs[0]), cs[0].remote)%2 == sum(clientAddr, serverAddr)%2 {
		t.Errorf("subflow port %d takes the first subflow's path", cs[0].local.Port)
	}
	p := te.conns[1].plan
	if p.Policy != PolicyAMPTCP || p.N != 2 || p.PathsOut != 2 || p.PathsBack != 1 {
		t.Errorf("plan %+v", p)
	}
}

// Without an answer from the mapping system, the connection gets the
// default policy and the failure is not cached: the next connection asks
// again.
func TestAMPTCPFallsBackWhenTheMapperTimesOut(t *testing.T) {
	te := newTestEngine(t, amptcpConfig)
	te.connect(1)
	timeout := fmt.Errorf("%w: 2 map-requests to 10.0.100.2:4342", ErrNoAnswer)
	te.lookupDone(Query{EID: serverAddr.Addr(), From: clientAddr.Addr()}, Mapping{}, time.Second, timeout)
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, localMapping, time.Millisecond, nil)
	te.noCreates("on fallback")
	p := te.conns[1].plan
	if p == nil || p.Policy != PolicyDefault || p.N != 1 || !strings.Contains(p.Fallback, "did not answer") {
		t.Fatalf("plan %+v, want the default policy with the reason", p)
	}
	te.lookups = nil
	te.connect(2)
	if len(te.lookups) != 1 || te.lookups[0].EID != serverAddr.Addr() {
		t.Errorf("second connection looked up %v, want the peer again (the local EID is cached)", te.lookups)
	}
	if c := te.counters(); c.Fallbacks != 1 || c.Lookups["failed"] != 1 {
		t.Errorf("counters %+v", c)
	}
}

// Answers are cached for their TTL: a connection within it opens its
// subflows at once, without a request; after it, the mapping is asked
// again.
func TestAMPTCPCacheHitWithinTTL(t *testing.T) {
	te := newTestEngine(t, amptcpConfig)
	te.connect(1)
	te.lookupDone(Query{EID: serverAddr.Addr(), From: clientAddr.Addr()}, peerMapping, time.Millisecond, nil)
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, localMapping, time.Millisecond, nil)
	te.k.created()
	te.lookups = nil
	te.clock.add(4 * time.Minute)
	te.connect(2)
	if len(te.lookups) != 0 {
		t.Errorf("looked up %v within the TTL", te.lookups)
	}
	if cs := te.k.created(); len(cs) != 1 || cs[0].token != 2 {
		t.Errorf("created %v, want one subflow of connection 2 at once", cs)
	}
	te.clock.add(2 * time.Minute)
	te.connect(3)
	if len(te.lookups) != 2 {
		t.Errorf("looked up %v after the TTL, want both EIDs again", te.lookups)
	}
}

// Connections that need the same mapping at once share one lookup.
func TestAMPTCPLookupsCoalesce(t *testing.T) {
	te := newTestEngine(t, amptcpConfig)
	te.connect(1)
	te.connect(2)
	want := []Query{{EID: serverAddr.Addr(), From: clientAddr.Addr()}, {EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}}
	if !slices.Equal(te.lookups, want) {
		t.Fatalf("lookups %v, want %v: one per EID, the local one as the peer asks it", te.lookups, want)
	}
	te.lookupDone(Query{EID: serverAddr.Addr(), From: clientAddr.Addr()}, peerMapping, time.Millisecond, nil)
	te.lookupDone(Query{EID: clientAddr.Addr(), From: serverAddr.Addr(), Local: true}, localMapping, time.Millisecond, nil)
	if cs := te.k.created(); len(cs) != 2 || cs[0].token == cs[1].token {
		t.Errorf("created %v, want one subflow for each connection", cs)
	}
}

// openAndEstablish runs connection 1 through its plan and establishes
// every subflow created.
func openAndEstablish(te *testEngine) []createCmd {
	te.connect(1)
	cs := te.k.created()
	te.establish(1, cs...)
	return cs
}

// A subflow that closes with an error is created again within the repair
// interval: with a new port and ID, the same residue, and never more
// subflows than the plan.
func TestRepairAfterSubClosedWithError(t *testing.T) {
	te := newTestEngine(t, "policy: subflows\nsubflows: 3\nrepair: {interval: 250ms}\n")
	cs := openAndEstablish(te)
	broken := cs[0]
	te.clock.add(time.Second)
	te.event(mptcp.Event{Type: mptcp.EventSubClosed, Token: 1, Local: localOf(broken), Remote: broken.remote, Error: 110})
	te.tick()
	again := te.k.created()
	if len(again) != 1 {
		t.Fatalf("repair created %v, want 1 subflow", again)
	}
	r := again[0]
	if r.local.Port == broken.local.Port || r.local.ID == broken.local.ID {
		t.Errorf("repair reused port or ID: %+v after %+v", r.local, broken.local)
	}
	if sum(localOf(r), r.remote)%3 != sum(localOf(broken), broken.remote)%3 {
		t.Errorf("repair port %d is not on the broken subflow's path", r.local.Port)
	}
	te.clock.add(20 * time.Millisecond)
	te.establish(1, r)
	if c := te.counters(); c.Broken["error"] != 1 || c.Repaired["error"] != 1 {
		t.Errorf("counters broken %v repaired %v", c.Broken, c.Repaired)
	}
	// Nothing more: the plan is full.
	te.clock.add(time.Second)
	te.tick()
	te.noCreates("with the plan full")
}

// A create whose handshake is not done by the next repair interval is
// destroyed and sent again; at no time are there more subflows than the
// plan.
func TestPendingCreateIsSentAgain(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 300ms}\n")
	te.connect(1)
	first := te.k.created()
	te.clock.add(100 * time.Millisecond)
	te.tick()
	te.noCreates("before the interval")
	te.clock.add(200 * time.Millisecond)
	te.tick()
	ds, cs := te.k.destroyed(), te.k.created()
	if len(ds) != 1 || ds[0].local != localOf(first[0]) {
		t.Fatalf("destroyed %v, want the pending %v", ds, first)
	}
	if len(cs) != 1 || cs[0].local.Port == first[0].local.Port {
		t.Fatalf("created %v, want one with a new port", cs)
	}
	// The old one's SUB_CLOSED, after the destroy, breaks nothing.
	te.event(mptcp.Event{Type: mptcp.EventSubClosed, Token: 1, Local: localOf(first[0]), Remote: first[0].remote, Error: 103})
	te.tick()
	te.noCreates("on the close of the destroyed subflow")
}

// A subflow that gets no acknowledgement for stall-time while it
// retransmits, while another subflow progresses, is destroyed and
// created again.
func TestStalledSubflowIsReplaced(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 250ms, stall-time: 300ms}\n")
	cs := openAndEstablish(te)
	stuck := cs[0]
	acked := uint64(1000)
	poll := func(retrans uint8) {
		acked += 1000
		te.diag.set(nil, []SubflowInfo{
			{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished, BytesAcked: acked},
			{Token: 1, Local: localOf(stuck), Remote: stuck.remote, State: tcpEstablished, BytesAcked: 5000, Retransmits: retrans},
		})
		te.tick()
	}
	poll(0)
	for range 2 {
		te.clock.add(100 * time.Millisecond)
		poll(1)
	}
	if ds := te.k.destroyed(); len(ds) != 0 {
		t.Fatalf("destroyed %v before stall-time", ds)
	}
	te.clock.add(150 * time.Millisecond)
	poll(2)
	ds := te.k.destroyed()
	if len(ds) != 1 || ds[0].local != localOf(stuck) {
		t.Fatalf("destroyed %v, want the stalled %v", ds, localOf(stuck))
	}
	if cs := te.k.created(); len(cs) != 1 {
		t.Errorf("created %v after the stall, want its replacement", cs)
	}
}

// An idle connection, where no subflow progresses, has no stall: the
// scheduler may simply not use a subflow.
func TestNoStallWithoutProgressElsewhere(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\n")
	cs := openAndEstablish(te)
	te.diag.set(nil, []SubflowInfo{
		{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished, BytesAcked: 10},
		{Token: 1, Local: localOf(cs[0]), Remote: cs[0].remote, State: tcpEstablished, BytesAcked: 10, Retransmits: 3},
	})
	for range 10 {
		te.clock.add(100 * time.Millisecond)
		te.tick()
	}
	if ds := te.k.destroyed(); len(ds) != 0 {
		t.Errorf("destroyed %v on an idle connection", ds)
	}
}

// A graceful close by the peer is a refusal: the slot is tried again
// after a wait that doubles, up to max-backoff.
func TestRefusedSubflowBacksOff(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 100ms, max-backoff: 400ms}\n")
	cs := openAndEstablish(te)
	var gaps []time.Duration
	for range 4 {
		te.event(mptcp.Event{Type: mptcp.EventSubClosed, Token: 1, Local: localOf(cs[0]), Remote: cs[0].remote})
		closed := te.clock.t
		for {
			te.clock.add(10 * time.Millisecond)
			te.tick()
			if cs = te.k.created(); len(cs) > 0 {
				break
			}
		}
		gaps = append(gaps, te.clock.t.Sub(closed))
		te.establish(1, cs...)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", gaps, want)
	}
}

// A link that comes back repairs at once, without waiting for the
// interval, and resends the creates sent while it was down.
func TestLinkUpRepairsAtOnce(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 3\nrepair: {interval: 500ms}\n")
	cs := openAndEstablish(te)
	te.clock.add(time.Second)
	te.event(mptcp.Event{Type: mptcp.EventSubClosed, Token: 1, Local: localOf(cs[0]), Remote: cs[0].remote, Error: 113})
	te.event(mptcp.Event{Type: mptcp.EventSubClosed, Token: 1, Local: localOf(cs[1]), Remote: cs[1].remote, Error: 113})
	te.tick() // both retried at once: their last create was long ago
	pending := te.k.created()
	if len(pending) != 2 {
		t.Fatalf("created %v", pending)
	}
	te.clock.add(50 * time.Millisecond)
	te.linkChanged()
	if ds := te.k.destroyed(); len(ds) != 2 {
		t.Errorf("destroyed %v, want the 2 pending creates", ds)
	}
	if cs := te.k.created(); len(cs) != 2 {
		t.Errorf("created %v, want 2 again", cs)
	}
}

// Connections that exist when the daemon starts are adopted: the
// subflows that exist fill the plan, only the missing ones are created,
// and nothing is destroyed.
func TestAdoptsExistingConnections(t *testing.T) {
	te := newTestEngine(t, "policy: subflows\nsubflows: 3\n")
	second := ap("10.1.0.1:40001")
	conns := []ConnInfo{
		{Token: 9, Local: clientAddr, Remote: serverAddr, State: tcpEstablished},
		{Local: ap("0.0.0.0:5201"), State: tcpListen, Listener: true},
		{Token: 10, Local: ap("10.1.0.1:5201"), Remote: ap("10.9.0.1:40000"), State: tcpEstablished},
	}
	subs := []SubflowInfo{
		{Token: 9, Local: clientAddr, Remote: serverAddr, State: tcpEstablished},
		{Token: 9, Local: second, Remote: serverAddr, LocalID: 4, State: tcpEstablished},
		{Token: 10, Local: ap("10.1.0.1:5201"), Remote: ap("10.9.0.1:40000"), State: tcpEstablished},
	}
	te.resync(conns, subs, true)
	cs := te.k.created()
	if len(cs) != 1 || cs[0].token != 9 {
		t.Fatalf("created %v, want the one subflow connection 9 misses", cs)
	}
	if cs[0].local.ID == 4 || cs[0].local.ID == 0 {
		t.Errorf("created with ID %d, which a subflow has", cs[0].local.ID)
	}
	residues := map[int]bool{}
	for _, a := range []netip.AddrPort{clientAddr, second, localOf(cs[0])} {
		residues[sum(a, serverAddr)%3] = true
	}
	if len(residues) != 3 {
		t.Errorf("the three subflows do not take three paths: %v", residues)
	}
	if ds := te.k.destroyed(); len(ds) != 0 {
		t.Errorf("destroyed %v on start", ds)
	}
	if c := te.conns[10]; c == nil || c.state != stateServer {
		t.Errorf("connection 10 (accepted on a listener) is %+v, want the server side", c)
	}
	if len(te.k.announces) != 0 {
		t.Errorf("announced %v on start", te.k.announces)
	}
}

// After lost events, a resync forgets closed connections, breaks slots
// whose subflows vanished (repair opens them again) and takes new
// connections.
func TestResyncAfterLostEvents(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\n")
	cs := openAndEstablish(te)
	te.connect(2)
	te.k.created()
	te.clock.add(time.Second)
	conns := []ConnInfo{
		{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished},
		{Token: 3, Local: ap("10.1.0.1:33001"), Remote: serverAddr, State: tcpEstablished},
	}
	subs := []SubflowInfo{
		{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished},
		{Token: 3, Local: ap("10.1.0.1:33001"), Remote: serverAddr, State: tcpEstablished},
	}
	te.resync(conns, subs, false)
	te.tick()
	if te.conns[2] != nil {
		t.Error("connection 2, gone from sock_diag, is still tracked")
	}
	created := te.k.created()
	tokens := map[uint32]int{}
	var again createCmd
	for _, c := range created {
		tokens[c.token]++
		if c.token == 1 {
			again = c
		}
	}
	if tokens[3] != 1 {
		t.Errorf("new connection 3 got %d subflows, want 1", tokens[3])
	}
	// Connection 1's subflow is gone: repaired at once (its create was a
	// second ago).
	if tokens[1] != 1 || again.local.Port == cs[0].local.Port {
		t.Errorf("created %v, want connection 1's lost subflow again", created)
	}
}

// Connections that are not whitelisted wait until they carried
// min-bytes; whitelisted ones open at once.
func TestLongLivedFilter(t *testing.T) {
	te := newTestEngine(t, `
policy: ndiffports
subflows: 2
long-lived:
  whitelist: [{prefix: 10.3.0.0/16, ports: [443]}]
  min-bytes: 100000
`)
	te.connect(1)
	te.noCreates("for a flow not yet long-lived")
	te.diag.set([]ConnInfo{{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished, Bytes: 99999}}, nil)
	te.clock.add(100 * time.Millisecond)
	te.tick()
	te.noCreates("below min-bytes")
	te.diag.set([]ConnInfo{{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished, Bytes: 100000}}, nil)
	te.clock.add(100 * time.Millisecond)
	te.tick()
	if cs := te.k.created(); len(cs) != 1 {
		t.Fatalf("created %v at min-bytes, want 1", cs)
	}
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: 2, Local: ap("10.1.0.1:33002"), Remote: ap("10.3.1.1:443")})
	if cs := te.k.created(); len(cs) != 1 || cs[0].token != 2 {
		t.Errorf("whitelisted connection got %v", cs)
	}
	te.event(mptcp.Event{Type: mptcp.EventEstablished, Token: 3, Local: ap("10.1.0.1:33003"), Remote: ap("10.3.1.1:80")})
	te.noCreates("for a port not whitelisted")
}

// fullmesh opens the address pairs it knows and those the peer
// announces later.
func TestFullmeshFollowsAnnouncements(t *testing.T) {
	te := newTestEngine(t, "policy: fullmesh\n")
	te.connect(1)
	cs := te.k.created()
	if len(cs) != 1 || cs[0].local.IP != addr("10.1.1.1") || cs[0].remote != serverAddr {
		t.Fatalf("created %v, want 10.1.1.1 -> %s", cs, serverAddr)
	}
	te.event(mptcp.Event{Type: mptcp.EventAnnounced, Token: 1, Remote: ap("10.2.1.1:0"), RemoteID: 1})
	cs = te.k.created()
	want := map[string]bool{"10.1.0.1->10.2.1.1:5201": true, "10.1.1.1->10.2.1.1:5201": true}
	for _, c := range cs {
		delete(want, fmt.Sprintf("%s->%s", c.local.IP, c.remote))
	}
	if len(cs) != 2 || len(want) != 0 {
		t.Errorf("after the announcement created %v", cs)
	}
	if ds := te.k.destroyed(); len(ds) != 0 {
		t.Errorf("destroyed %v", ds)
	}
	te.event(mptcp.Event{Type: mptcp.EventRemoved, Token: 1, RemoteID: 1})
	if ds := te.k.destroyed(); len(ds) != 2 {
		t.Errorf("after the removal destroyed %v, want the 2 subflows to it", ds)
	}
}

// The kernel's subflow limit, plus the first subflow, caps every plan.
func TestKernelLimitCapsThePlan(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 6\n")
	te.setLimits(mptcp.Limits{Subflows: 2})
	te.connect(1)
	if cs := te.k.created(); len(cs) != 2 {
		t.Errorf("created %d, want 2 (limit 2 beyond the first)", len(cs))
	}
	if p := te.conns[1].plan; p.N != 3 || p.Want != 6 || p.Capped != "kernel limit" {
		t.Errorf("plan %+v", p)
	}
}

// A create the kernel refuses is counted by errno and tried again one
// interval later, then after a wait that doubles.
func TestCreateFailureRetriesAtTheInterval(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 250ms}\n")
	te.k.createErr = &mptcp.CommandError{Cmd: mptcp.CmdSubflowCreate, Errno: 101} // ENETUNREACH
	te.connect(1)
	if c := te.counters(); c.CreateFailed["ENETUNREACH"] != 1 {
		t.Fatalf("create failures %v", c.CreateFailed)
	}
	te.k.createErr = nil
	te.clock.add(200 * time.Millisecond)
	te.tick()
	te.noCreates("before the interval")
	te.clock.add(50 * time.Millisecond)
	te.k.createErr = &mptcp.CommandError{Cmd: mptcp.CmdSubflowCreate, Errno: 101}
	te.tick()
	if c := te.counters(); c.CreateFailed["ENETUNREACH"] != 2 {
		t.Fatalf("create failures %v, want the retry", c.CreateFailed)
	}
	te.k.createErr = nil
	te.clock.add(450 * time.Millisecond)
	te.tick()
	te.noCreates("before twice the interval")
	te.clock.add(50 * time.Millisecond)
	te.tick()
	if cs := te.k.created(); len(cs) != 1 {
		t.Errorf("created %v, want the second retry", cs)
	}
}

// A closed connection is forgotten, and so are its subflows' events.
func TestClosedConnectionIsForgotten(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\n")
	openAndEstablish(te)
	te.event(mptcp.Event{Type: mptcp.EventClosed, Token: 1})
	if len(te.conns) != 0 {
		t.Fatalf("connections %v after CLOSED", te.conns)
	}
	te.clock.add(time.Second)
	te.tick()
	te.noCreates("for a closed connection")
}

// The setup time runs from ESTABLISHED to the last planned subflow's
// SUB_ESTABLISHED.
func TestSetupTime(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 3\n")
	te.connect(1)
	cs := te.k.created()
	te.clock.add(time.Millisecond)
	te.establish(1, cs[0])
	te.clock.add(2 * time.Millisecond)
	te.establish(1, cs[1])
	if got := te.conns[1].setup; got != 3*time.Millisecond {
		t.Errorf("setup %v, want 3ms", got)
	}
	if h := te.counters().SetupSeconds; h.Count != 1 || h.Sum != 0.003 {
		t.Errorf("setup histogram %+v", h)
	}
}

// BenchmarkBurst handles the events of connections opened in a burst,
// each with a plan of 4 subflows: what the engine costs per connection,
// the kernel's commands aside.
func BenchmarkBurst(b *testing.B) {
	cfg, err := Parse([]byte("policy: subflows\nsubflows: 4\n"))
	if err != nil {
		b.Fatal(err)
	}
	e := newEngine(cfg, slog.New(slog.DiscardHandler))
	k := &fakeKernel{inUse: map[uint16]bool{}}
	e.k, e.diag = k, &fakeDiag{}
	e.rand = func(n int) int { return n / 2 }
	e.localAddrs = func() []netip.Addr { return nil }
	e.ports = func() portRange { return defaultPorts }
	b.ReportAllocs()
	for i := range b.N {
		token := uint32(i + 1)
		local := netip.AddrPortFrom(clientAddr.Addr(), uint16(10000+i%20000))
		e.event(mptcp.Event{Type: mptcp.EventCreated, Token: token, Local: local, Remote: serverAddr})
		e.event(mptcp.Event{Type: mptcp.EventEstablished, Token: token, Local: local, Remote: serverAddr})
		for _, c := range k.created() {
			e.event(mptcp.Event{Type: mptcp.EventSubEstablished, Token: token, Local: localOf(c), Remote: c.remote})
		}
		e.event(mptcp.Event{Type: mptcp.EventClosed, Token: token})
	}
}

// A create that gets no handshake waits twice as long the next time, up
// to half a second: a burst of connections that slows every handshake is not
// answered with a storm of creates.
func TestPendingCreateWaitDoubles(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 250ms}\n")
	te.connect(1)
	te.k.created()
	var waits []time.Duration
	for range 5 {
		waited := time.Duration(0)
		for len(te.k.destroyed()) == 0 {
			te.clock.add(10 * time.Millisecond)
			waited += 10 * time.Millisecond
			te.tick()
			if waited > 5*time.Second {
				t.Fatal("the pending create was never sent again")
			}
		}
		waits = append(waits, waited)
		te.k.created()
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits before each new create %v, want %v", waits, want)
	}
}

// A resync forgets the connections the kernel lists as closing (their
// CLOSED event lost): their subflows are not repaired.
func TestResyncForgetsClosingConnections(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\n")
	openAndEstablish(te)
	const finWait1 = 4
	te.resync([]ConnInfo{{Token: 1, Local: clientAddr, Remote: serverAddr, State: finWait1}},
		[]SubflowInfo{{Token: 1, Local: clientAddr, Remote: serverAddr, State: finWait1}}, false)
	te.clock.add(time.Second)
	te.tick()
	if te.conns[1] != nil {
		t.Error("the closing connection is still tracked")
	}
	te.noCreates("for a closing connection")
}

// ENOTCONN on a create says the connection is closing: it is forgotten,
// not retried.
func TestCreateOnClosingConnection(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\n")
	te.k.createErr = &mptcp.CommandError{Cmd: mptcp.CmdSubflowCreate, Errno: unix.ENOTCONN}
	te.connect(1)
	if te.conns[1] != nil {
		t.Error("the connection is still tracked")
	}
	te.clock.add(time.Second)
	te.tick()
	te.noCreates("after ENOTCONN")
}

// A create whose subflow sock_diag shows established, its event not yet
// come (MPTCP v1 joins wait for the peer's last ACK; a burst delays the
// events), is not destroyed and sent again.
func TestHandshakenCreateIsKept(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nrepair: {interval: 250ms}\n")
	te.connect(1)
	cs := te.k.created()
	te.diag.set(nil, []SubflowInfo{
		{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished},
		{Token: 1, Local: localOf(cs[0]), Remote: cs[0].remote, State: tcpEstablished},
	})
	for range 20 {
		te.clock.add(100 * time.Millisecond)
		te.tick()
	}
	if ds := te.k.destroyed(); len(ds) != 0 {
		t.Errorf("destroyed %v, an established join", ds)
	}
	te.noCreates("while the join is established")
}
