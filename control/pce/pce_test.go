package pce

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// overlay is a fake overlay: what each node's metrics say, which the
// test changes, and the registrations.
type overlay struct {
	mu   sync.Mutex
	rows map[string][]Row // by metrics URL
	regs []mapserver.Registered
	sent []netip.AddrPort // SMRs
}

func (o *overlay) fetch(_ context.Context, url string) ([]Row, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rows, ok := o.rows[url]
	if !ok {
		return nil, fmt.Errorf("connection refused")
	}
	return slices.Clone(rows), nil
}

func (o *overlay) set(node string, addr string, rtt time.Duration, up bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	url := urlOf(node)
	a := netip.MustParseAddr(addr)
	rows := o.rows[url]
	for i := range rows {
		if rows[i].Addr == a {
			rows[i] = Row{Addr: a, Up: up, RTT: rtt}
			return
		}
	}
	o.rows[url] = append(rows, Row{Addr: a, Up: up, RTT: rtt})
}

func (o *overlay) Send(dst netip.AddrPort, _ []byte) error {
	o.mu.Lock()
	o.sent = append(o.sent, dst)
	o.mu.Unlock()
	return nil
}

func (o *overlay) smrs() []netip.AddrPort {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.sent
	o.sent = nil
	return out
}

// The addresses: xTRs xs (site a) and xd (site b), RTRs r1 to r4; node N
// is at 10.0.N.1 and serves its metrics there.
var addrOf = map[string]string{"xs": "10.0.10.1", "xd": "10.0.20.1", "xs2": "10.0.30.1",
	"r1": "10.0.1.1", "r2": "10.0.2.1", "r3": "10.0.3.1", "r4": "10.0.4.1"}

func urlOf(node string) string { return config.MetricsURL(netip.MustParseAddr(addrOf[node]), 9342) }

func registered(site, node, prefix string) mapserver.Registered {
	a := netip.MustParseAddr(addrOf[node])
	return mapserver.Registered{Site: site, EID: mapping.NewEID(0, netip.MustParsePrefix(prefix)),
		Source: netip.AddrPortFrom(a, 4342), RLOCs: []netip.Addr{a}}
}

// paperLike is [LISP-TE]'s situation: from xs to xd, ELPs through r1, r2,
// r3 of 80, 84 and 90 ms and through r4 of 300 ms.
func paperLike(t *testing.T, extra string) (*Engine, *overlay, *time.Time) {
	t.Helper()
	cfg, err := config.Parse([]byte(`
roles: [te]
te:
  nodes:
    - {name: r1, rlocs: [10.0.1.1]}
    - {name: r2, rlocs: [10.0.2.1]}
    - {name: r3, rlocs: [10.0.3.1]}
    - {name: r4, rlocs: [10.0.4.1]}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	o := &overlay{rows: map[string][]Row{}}
	o.regs = []mapserver.Registered{registered("a", "xs", "10.1.0.0/24"), registered("b", "xd", "10.2.0.0/24")}
	for i, rtt := range []time.Duration{80, 84, 90, 300} {
		r := fmt.Sprintf("r%d", i+1)
		o.set("xs", addrOf[r], rtt*time.Millisecond/2, true)
		o.set(r, addrOf["xd"], rtt*time.Millisecond/2, true)
	}
	o.set("xs", addrOf["xd"], 60*time.Millisecond, true) // the direct path, not an ELP
	o.set("xd", addrOf["xs"], 60*time.Millisecond, true)
	now := time.Unix(1_800_000_000, 0)
	e := New(cfg.TE, Options{
		Registrations: func() []mapserver.Registered { o.mu.Lock(); defer o.mu.Unlock(); return slices.Clone(o.regs) },
		Fetch:         o.fetch,
		Sender:        o,
		LocalRLOCs:    func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("10.0.100.2")} },
	})
	e.SetClock(func() time.Time { return now })
	e.Collect(context.Background())
	return e, o, &now
}

// ask is a Map-Request for the site b prefix from itr (an ITR-RLOC), with
// source EID src if not empty, answered by the engine.
func ask(t *testing.T, e *Engine, itr, src string) (lisp.MapRecord, bool) {
	t.Helper()
	reg := lisp.MapRecord{TTL: 1440, EID: lisp.IPAddress(netip.MustParseAddr("10.2.0.0")), MaskLen: 24,
		Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.IPAddress(netip.MustParseAddr(addrOf["xd"]))}}}
	req := &lisp.MapRequest{Nonce: 1, ITRRLOCs: []lisp.Address{lisp.IPAddress(netip.MustParseAddr(itr))}}
	if src != "" {
		req.SourceEID = lisp.IPAddress(netip.MustParseAddr(src))
	}
	return e.Engineer(resolver.Question{
		Answer:  mapping.Answer{Kind: mapping.Mapping, EID: mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/24")), Record: reg},
		Request: req, From: netip.AddrPortFrom(netip.MustParseAddr(itr), 4342),
	})
}

// locators prints a record's locators as "hop>hop p/w", the way the
// tests read them.
func locators(rec lisp.MapRecord) []string {
	var out []string
	for _, l := range rec.Locators {
		var hops []string
		if elp, ok := l.Address.LCAF().(*lisp.ELP); ok {
			for _, h := range elp.Hops {
				if !h.RLOCProbe || !h.Strict || h.Lookup {
					hops = append(hops, "bits?")
				}
				hops = append(hops, h.Address.IP().String())
			}
		} else {
			hops = append(hops, l.Address.IP().String())
		}
		out = append(out, fmt.Sprintf("%s %d/%d", strings.Join(hops, ">"), l.Priority, l.Weight))
	}
	return out
}

func TestPaperLikeSet(t *testing.T) {
	e, _, _ := paperLike(t, "")
	rec, ok := ask(t, e, addrOf["xs"], "")
	if !ok {
		t.Fatal("no engineered answer")
	}
	want := []string{"10.0.1.1>10.0.20.1 1/50", "10.0.2.1>10.0.20.1 1/49", "10.0.3.1>10.0.20.1 1/48"}
	if got := locators(rec); !slices.Equal(got, want) {
		t.Fatalf("xs gets %v, want %v", got, want)
	}
	if rec.TTL != 5 || rec.MaskLen != 24 {
		t.Errorf("record TTL %d mask %d", rec.TTL, rec.MaskLen)
	}
	st := e.Status()
	if len(st.Pairs) != 1 || st.Pairs[0].Reason != "first set" || len(st.Pairs[0].Excluded) != 1 ||
		!strings.Contains(st.Pairs[0].Excluded[0], "a > r4 > b: rule 1: RTT 300.0 ms beyond 120.0 ms") {
		t.Errorf("status: %+v", st.Pairs)
	}
	// An RTR gets the same list, every ELP in use; so does a host of
	// site a, as `amptcp pm` asks, with xs's set.
	if rec, _ := ask(t, e, addrOf["r2"], ""); !slices.Equal(locators(rec), []string{"10.0.1.1>10.0.20.1 1/1", "10.0.2.1>10.0.20.1 1/1", "10.0.3.1>10.0.20.1 1/1"}) {
		t.Errorf("r2 gets %v", locators(rec))
	}
	if rec, _ := ask(t, e, "10.1.0.2", ""); !slices.Equal(locators(rec), want) {
		t.Errorf("a host of site a gets %v", locators(rec))
	}
	if c := e.Counters(); c.Pairs != 1 || c.Vertices != 6 || c.Edges != 10 || c.Computations != 1 || c.Changes != 1 || c.AnswersMasked != 2 || c.AnswersAll != 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestDirect: with direct on, the 60 ms direct path is the best path,
// and rule 1 (90 ms) keeps the three ELPs up to 90 ms beside it.
func TestDirect(t *testing.T) {
	e, _, _ := paperLike(t, "  direct: true\n")
	rec, _ := ask(t, e, addrOf["xs"], "")
	if got := locators(rec); !slices.Equal(got, []string{"10.0.20.1 1/50", "10.0.1.1>10.0.20.1 1/49", "10.0.2.1>10.0.20.1 1/48", "10.0.3.1>10.0.20.1 1/47"}) {
		t.Fatalf("xs gets %v", got)
	}
}

// TestSlotsAcrossSources: a second source's set takes slots after the
// first's; each source sees its own ELPs usable and the other's at 255,
// in the same positions; RTRs see them all.
func TestSlotsAcrossSources(t *testing.T) {
	e, o, _ := paperLike(t, "")
	o.mu.Lock()
	o.regs = append(o.regs, registered("c", "xs2", "10.3.0.0/24"))
	o.mu.Unlock()
	// xs2 reaches r3 and r4 quickly, r1 slowly.
	o.set("xs2", addrOf["r1"], 200*time.Millisecond, true)
	o.set("xs2", addrOf["r3"], 10*time.Millisecond, true)
	o.set("xs2", addrOf["r4"], 10*time.Millisecond, true)
	o.set("r4", addrOf["xd"], 45*time.Millisecond, true)
	e.Collect(context.Background())
	ask(t, e, addrOf["xs"], "")
	rec, _ := ask(t, e, addrOf["xs2"], "")
	want := []string{"10.0.1.1>10.0.20.1 255/0", "10.0.2.1>10.0.20.1 255/0", "10.0.3.1>10.0.20.1 1/50", "10.0.4.1>10.0.20.1 1/49"}
	if got := locators(rec); !slices.Equal(got, want) {
		t.Fatalf("xs2 gets %v, want %v", got, want)
	}
	rec, _ = ask(t, e, addrOf["xs"], "")
	want = []string{"10.0.1.1>10.0.20.1 1/50", "10.0.2.1>10.0.20.1 1/49", "10.0.3.1>10.0.20.1 1/48", "10.0.4.1>10.0.20.1 255/0"}
	if got := locators(rec); !slices.Equal(got, want) {
		t.Fatalf("xs gets %v, want %v", got, want)
	}
	// The source EID says who asks, whatever the ITR-RLOC.
	if rec, _ := ask(t, e, "192.0.2.99", "10.3.0.7"); locators(rec)[3] != "10.0.4.1>10.0.20.1 1/49" {
		t.Errorf("asking as site c: %v", locators(rec))
	}
	if st := e.Status(); len(st.Destinations) != 1 || len(st.Destinations[0].Slots) != 4 || st.Destinations[0].Slots[2].Users != 2 {
		t.Errorf("slots %+v", st.Destinations)
	}
}

// TestFailure: r2 going down for xs replaces xs's set at once, once: the
// routers that asked are solicited; then the set holds while r2 stays
// down and while the RTTs wander.
func TestFailure(t *testing.T) {
	e, o, now := paperLike(t, "")
	ask(t, e, addrOf["xs"], "")
	ask(t, e, addrOf["r1"], "")
	o.smrs()
	*now = now.Add(5 * time.Second)
	o.set("xs", addrOf["r2"], 42*time.Millisecond, false)
	e.Collect(context.Background())
	rec, _ := ask(t, e, addrOf["xs"], "")
	want := []string{"10.0.1.1>10.0.20.1 1/50", "10.0.2.1>10.0.20.1 255/0", "10.0.3.1>10.0.20.1 1/49"}
	if got := locators(rec); !slices.Equal(got, want) {
		t.Fatalf("after r2 went down xs gets %v, want %v", got, want)
	}
	st := e.Status().Pairs[0]
	if st.Changes != 2 || st.Reason != "a no longer reaches r2 (10.0.2.1)" {
		t.Errorf("pair %+v", st)
	}
	// The slot of r2 retired: the list did not change, no SMR is due.
	if smrs := o.smrs(); len(smrs) != 0 {
		t.Errorf("SMRs %v for a slot that only retired", smrs)
	}
	for i := range 30 {
		*now = now.Add(5 * time.Second)
		o.set("xs", addrOf["r1"], time.Duration(40+i%3)*time.Millisecond, true)
		e.Collect(context.Background())
		e.Refresh(nil)
	}
	if st := e.Status().Pairs[0]; st.Changes != 2 {
		t.Errorf("%d changes while r2 stayed down: %s", st.Changes, st.Reason)
	}
	// r2 back: a better set (3 paths again), after three computations in
	// a row and the hold-down since the last change.
	o.set("xs", addrOf["r2"], 42*time.Millisecond, true)
	e.Collect(context.Background()) // the set in use did not change: nothing computed
	for range 2 {
		*now = now.Add(time.Second)
		e.Refresh(nil)
	}
	if st := e.Status().Pairs[0]; st.Changes != 2 || st.Pending != 2 {
		t.Fatalf("r2 back, two computations: %+v", st)
	}
	e.Refresh(nil)
	if st := e.Status().Pairs[0]; st.Changes != 3 || st.Reason != "more paths: 3, were 2" {
		t.Fatalf("r2 back: %+v", st)
	}
	if rec, _ := ask(t, e, addrOf["xs"], ""); !slices.Equal(locators(rec), []string{"10.0.1.1>10.0.20.1 1/50", "10.0.2.1>10.0.20.1 1/49", "10.0.3.1>10.0.20.1 1/48"}) {
		t.Errorf("r2 back in its slot: %v", locators(rec))
	}
}

// TestNewSlotSolicits: a new ELP takes a new slot, and the routers that
// asked for the destination get an SMR, to ask again before an ITR sends
// on the new path ID.
func TestNewSlotSolicits(t *testing.T) {
	e, o, now := paperLike(t, "")
	ask(t, e, addrOf["xs"], "")
	ask(t, e, addrOf["r1"], "")
	o.smrs()
	*now = now.Add(5 * time.Second)
	o.set("xs", addrOf["r2"], 0, false)
	o.set("xs", addrOf["r4"], 42*time.Millisecond, true)
	o.set("r4", addrOf["xd"], 42*time.Millisecond, true)
	e.Collect(context.Background())
	rec, _ := ask(t, e, addrOf["xs"], "")
	if got := locators(rec); len(got) != 4 || got[3] != "10.0.4.1>10.0.20.1 1/49" {
		t.Fatalf("xs gets %v", got)
	}
	smrs := o.smrs()
	var to []string
	for _, s := range smrs {
		to = append(to, s.String())
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"10.0.1.1:4342", "10.0.10.1:4342"}) {
		t.Errorf("SMRs to %v, want r1 and xs", to)
	}
}

// TestUnknownAndUnengineered: a destination without ELPs yet keeps its
// registered mapping, with the role's TTL, so that its ITRs ask again
// soon; a prefix registered since the last reading is learnt on demand;
// a prefix of no xTR the role knows keeps its mapping as it is.
func TestUnknownAndUnengineered(t *testing.T) {
	e, o, now := paperLike(t, "")
	rec, ok := ask(t, e, "192.0.2.1", "")
	if !ok || !slices.Equal(locators(rec), []string{"10.0.20.1 1/100"}) || rec.TTL != 5 {
		t.Errorf("an unknown requester, no ELPs yet: %v %v ttl %d", ok, locators(rec), rec.TTL)
	}
	// Site b's xTR registers from elsewhere now; the role has not read the
	// registrations since, and a request comes at once.
	o.mu.Lock()
	o.regs[1].Source = netip.MustParseAddrPort("10.0.20.9:4342")
	o.regs[1].EID = mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/24"))
	o.regs = o.regs[:1]
	o.mu.Unlock()
	e.Collect(context.Background()) // b is gone
	if rec, ok := ask(t, e, addrOf["xs"], ""); !ok || rec.TTL != 5 || len(rec.Locators) != 1 {
		t.Errorf("a prefix no xTR the role knows registered: %v %v ttl %d, want the registered mapping for the role's TTL",
			ok, locators(rec), rec.TTL)
	}
	// b registers again and is asked for before the role reads the
	// registrations again (within relearn of its last reading): the
	// registered mapping, for the role's TTL.
	o.mu.Lock()
	o.regs = append(o.regs, registered("b", "xd", "10.2.0.0/24"))
	o.mu.Unlock()
	o.smrs()
	if rec, ok := ask(t, e, addrOf["xs"], ""); !ok || rec.TTL != 5 || len(rec.Locators) != 1 {
		t.Errorf("b registered again, asked at once: %v %v", ok, locators(rec))
	}
	// At the next reading the role learns b and xs's pair, then computes
	// its ELPs and solicits the routers that asked: xs, and the unknown
	// requester, which got the registered mapping too.
	*now = now.Add(time.Second)
	e.Collect(context.Background())
	e.Collect(context.Background())
	if smrs := o.smrs(); len(smrs) != 2 || smrs[0].Addr().String() != addrOf["xs"] || smrs[1].Addr().String() != "192.0.2.1" {
		t.Errorf("SMRs %v, want one to xs and one to 192.0.2.1", smrs)
	}
	if rec, _ := ask(t, e, addrOf["xs"], ""); len(rec.Locators) != 3 {
		t.Errorf("after the SMR: %v", locators(rec))
	}
	o.mu.Lock()
	o.rows = map[string][]Row{}
	o.mu.Unlock()
	e.Collect(context.Background()) // one failed read: the rows stay
	e.Collect(context.Background())
	if st := e.Status(); len(st.Nodes[0].Error) == 0 {
		t.Errorf("no read error shown: %+v", st.Nodes)
	}
}

// TestRule2: with every link's capacity known (20 Mbit/s into xd) and a
// 1 MiB receive buffer, rule 2 alone leaves out the 300 ms ELP: it would
// make the predicted throughput fall, not rise.
func TestRule2(t *testing.T) {
	e, _, _ := paperLike(t, `  head-of-line:
    rtt-factor: 0
    max-spread: 0s
    receive-window: 1MiB
    capacities: [{from: "*", to: b, rate: 20Mbit}, {from: a, to: "*", rate: 1Gbit}]
`)
	rec, _ := ask(t, e, addrOf["xs"], "")
	if got := locators(rec); len(got) != 3 {
		t.Fatalf("xs gets %v", got)
	}
	st := e.Status().Pairs[0]
	if len(st.Excluded) != 1 || !strings.Contains(st.Excluded[0], "a > r4 > b: rule 2: predicted 14.0 Mbit/s with it, 46.6 Mbit/s without") {
		t.Errorf("excluded %v", st.Excluded)
	}
}

// TestAlone: a te role without a map-server computes the sets of its
// configured pairs of configured xTRs, for the status and the metrics.
func TestAlone(t *testing.T) {
	cfg, err := config.Parse([]byte(`
roles: [te]
te:
  nodes:
    - {name: xs, role: xtr, rlocs: [10.0.10.1]}
    - {name: xd, role: xtr, rlocs: [10.0.20.1]}
    - {name: r1, rlocs: [10.0.1.1]}
    - {name: r2, rlocs: [10.0.2.1]}
  pairs: [{source: xs, destination: xd}]
`))
	if err != nil {
		t.Fatal(err)
	}
	o := &overlay{rows: map[string][]Row{}}
	for _, r := range []string{"r1", "r2"} {
		o.set("xs", addrOf[r], 20*time.Millisecond, true)
		o.set(r, addrOf["xd"], 20*time.Millisecond, true)
	}
	e := New(cfg.TE, Options{Fetch: o.fetch})
	e.Collect(context.Background())
	st := e.Status()
	if len(st.Pairs) != 1 || len(st.Pairs[0].ELPs) != 2 || st.Pairs[0].Reason != "first set" {
		t.Fatalf("pairs %+v", st.Pairs)
	}
	if c := e.Counters(); len(c.Sets) != 1 || c.Sets[0].ELPs != 2 || len(c.Matrix) != 4 {
		t.Errorf("counters %+v", c)
	}
}

// TestUnknownSource: the destination is known but the source's site
// registered after the role last read the registrations, and its ITR
// asks at once: it gets the registered mapping for the role's TTL, and
// once the role knows the source, its ELPs and an SMR, so that the ITR
// does not keep the direct path for the TTL.
func TestUnknownSource(t *testing.T) {
	e, o, now := paperLike(t, "")
	o.mu.Lock()
	o.regs = o.regs[1:] // site b only
	o.mu.Unlock()
	*now = now.Add(time.Second)
	e.Collect(context.Background())
	o.mu.Lock()
	o.regs = append(o.regs, registered("a", "xs", "10.1.0.0/24"))
	o.mu.Unlock()
	o.smrs()
	if rec, ok := ask(t, e, addrOf["xs"], "10.1.0.1"); !ok || rec.TTL != 5 || len(rec.Locators) != 1 {
		t.Errorf("a source the role does not know yet: %v %v ttl %d, want the registered mapping for the role's TTL",
			ok, locators(rec), rec.TTL)
	}
	*now = now.Add(time.Second)
	e.Collect(context.Background())
	e.Collect(context.Background())
	if smrs := o.smrs(); len(smrs) != 1 || smrs[0].Addr().String() != addrOf["xs"] {
		t.Errorf("SMRs %v, want one to xs", smrs)
	}
	if rec, _ := ask(t, e, addrOf["xs"], "10.1.0.1"); len(rec.Locators) != 3 {
		t.Errorf("after the SMR: %v", locators(rec))
	}
}
