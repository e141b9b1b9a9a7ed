package xtr

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// statefulSite is a site behind three ELPs, through RTRs .11, .12 and
// .13, that binds subflows; map-server a forwards its requests.
const statefulSite = `
roles: [xtr]
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0], mptcp-subflows: bind-stateful}
map-cache: {map-resolvers: [192.0.2.1]}
xtr:
  database-mappings:
    - eid-prefix: 10.2.0.0/16
      ttl: 10m
      locators:
        - {elp: [192.0.2.11, 198.51.100.1], priority: 1, weight: 50}
        - {elp: [192.0.2.12, 198.51.100.1], priority: 1, weight: 40}
        - {elp: [192.0.2.13, 198.51.100.1], priority: 1, weight: 30}
        - {address: 198.51.100.1, priority: 2, weight: 1}
  map-servers: [{address: 192.0.2.1, key-id: 3, secret: "` + keyA + `"}]
`

// subflowTable is the ETR's subflow table, by hand.
type subflowTable struct {
	mu   sync.Mutex
	subs map[dataplane.Flow]uint64 // by flow, its connection
}

func (s *subflowTable) lookup(f dataplane.Flow) (dataplane.Subflow, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.subs[f]
	return dataplane.Subflow{Connection: c}, ok, nil
}

func (s *subflowTable) set(f control.Flow, conn uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn == 0 {
		delete(s.subs, dpFlow(f))
	} else {
		s.subs[dpFlow(f)] = conn
	}
}

func statefulHarness(t *testing.T) (*harness, *subflowTable) {
	t.Helper()
	cfg, err := config.Parse([]byte(statefulSite))
	if err != nil {
		t.Fatal(err)
	}
	table := &subflowTable{subs: map[dataplane.Flow]uint64{}}
	h := &harness{net: &fakeNet{t: t}, now: time.Unix(1_700_000_000, 0)}
	h.x, err = New(cfg.XTR, Options{Sender: h.net, LocalRLOCs: func() []netip.Addr { return []netip.Addr{rloc} },
		Stateful: cfg.Dataplane.Stateful(), Subflow: table.lookup})
	if err != nil {
		t.Fatal(err)
	}
	h.x.SetClock(func() time.Time { return h.now })
	return h, table
}

func flowOf(sport uint16) control.Flow {
	return control.Flow{Protocol: 6, Source: netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), sport),
		Dest: netip.MustParseAddrPort("10.2.0.1:5201")}
}

// flowRequest is a stateful Map-Request for f from the ITR-RLOC itr.
func flowRequest(f control.Flow, itr string) *lisp.MapRequest {
	return &lisp.MapRequest{Nonce: uint64(f.Source.Port()), SourceEID: lisp.IPAddress(f.Source.Addr()),
		ITRRLOCs: []lisp.Address{lisp.MustParseAddress(itr)},
		Records:  []lisp.RequestRecord{{EID: control.FlowAddress(f), MaskLen: 32}}}
}

// boundTo is the first hop of the one ELP a binding's answer carries.
func boundTo(t *testing.T, rep *lisp.MapReply, f control.Flow) string {
	t.Helper()
	if len(rep.Records) != 1 || !f.Is(rep.Records[0].EID) || len(rep.Records[0].Locators) != 1 || rep.Records[0].TTL != 10 {
		t.Fatalf("answer %s, want the flow's record with one ELP", rep)
	}
	elp, ok := rep.Records[0].Locators[0].Address.LCAF().(*lisp.ELP)
	if !ok {
		t.Fatalf("bound to %s, want an ELP", rep.Records[0].Locators[0].Address)
	}
	return elp.Hops[0].Address.String()
}

const itrA = "203.0.113.1"

var fromMS = netip.MustParseAddrPort("192.0.2.1:4342")

// The ETR spreads a connection's subflows over its ELPs, by rank; a
// second connection starts again from the best; the same question gets
// the same answer, an RTR's too; an RTR's for a subflow not bound gets
// none.
func TestBinderSpreadsSubflows(t *testing.T) {
	h, table := statefulHarness(t)
	var out control.Outbox
	ask := func(f control.Flow, itr string) (RequestResult, string) {
		r := h.x.HandleRequest(flowRequest(f, itr), 4342, fromMS, &out)
		if out.Len() == 0 {
			return r, ""
		}
		dst, rep := reply(t, &out)
		if dst.Addr().String() != itr {
			t.Errorf("answered to %s, want %s", dst, itr)
		}
		return r, boundTo(t, rep, f)
	}
	want := []string{"192.0.2.11", "192.0.2.12", "192.0.2.13", "192.0.2.11"}
	for i, w := range want {
		f := flowOf(uint16(40000 + i))
		table.set(f, 7) // the ETR saw the SYN first: one connection
		if r, got := ask(f, itrA); r != RequestBound || got != w {
			t.Errorf("subflow %d: %s bound to %s, want %s", i, r, got, w)
		}
	}
	other := flowOf(41000)
	table.set(other, 8)
	if _, got := ask(other, itrA); got != "192.0.2.11" {
		t.Errorf("another connection's first subflow bound to %s", got)
	}
	// Asked again, by the ITR or an RTR of the ELP: the same ELP.
	for _, who := range []string{itrA, "192.0.2.12"} {
		if r, got := ask(flowOf(40001), who); r != RequestBound || got != "192.0.2.12" {
			t.Errorf("asked again by %s: %s %s", who, r, got)
		}
	}
	// An RTR asks for a subflow nobody bound: nothing.
	if r, got := ask(flowOf(42000), "192.0.2.13"); r != RequestRTRUnbound || got != "" {
		t.Errorf("an RTR's question for an unbound subflow: %s %q", r, got)
	}
	c := h.x.Counters()
	if c.Bound != 5 || c.RTRUnbound != 1 || c.Bindings != 5 || c.Requests[RequestBound] != 7 {
		t.Errorf("counters %+v", c)
	}
	st := h.x.Status()
	if len(st.Bindings) != 5 || st.Bindings[0].Connection != 7 || len(st.Bindings[1].Askers) != 2 {
		t.Errorf("status %+v", st.Bindings)
	}
}

// A request that comes before its subflow's SYN waits for it, so that
// the subflow is bound in its connection; one whose SYN never comes is
// bound after a while with the hosts for its connection.
func TestBinderWaitsForTheSYN(t *testing.T) {
	h, table := statefulHarness(t)
	var out control.Outbox
	first, second := flowOf(40000), flowOf(40001)
	table.set(first, 7)
	h.x.HandleRequest(flowRequest(first, itrA), 4342, fromMS, &out)
	out.Reset()
	if r := h.x.HandleRequest(flowRequest(second, itrA), 4342, fromMS, &out); r != RequestBound || out.Len() != 0 {
		t.Fatalf("before the SYN: %s, %d datagrams", r, out.Len())
	}
	h.x.TickWaiting()
	if got := h.net.take(); len(got) != 0 {
		t.Fatalf("answered before the SYN: %v", got)
	}
	table.set(second, 7)
	h.x.TickWaiting()
	got := h.net.take()
	if len(got) != 1 || got[0].dst != netip.MustParseAddrPort(itrA+":4342") {
		t.Fatalf("after the SYN: %v", got)
	}
	if hop := boundTo(t, got[0].msg.(*lisp.MapReply), second); hop != "192.0.2.12" {
		t.Errorf("the join bound to %s, want the second ELP", hop)
	}
	// No SYN at all: bound after synWait, by the hosts.
	third := flowOf(40002)
	h.x.HandleRequest(flowRequest(third, itrA), 4342, fromMS, &out)
	h.now = h.now.Add(synWait)
	h.x.TickWaiting()
	got = h.net.take()
	if len(got) != 1 {
		t.Fatalf("after synWait: %v", got)
	}
	if hop := boundTo(t, got[0].msg.(*lisp.MapReply), third); hop != "192.0.2.13" {
		t.Errorf("bound by the hosts to %s, want the third ELP", hop)
	}
	if c := h.x.Counters(); c.Waited != 2 {
		t.Errorf("counters %+v", c)
	}
}

// A binding ends with its subflow in the ETR's table, or, never seen
// there, after unseenTTL.
func TestBindingsEnd(t *testing.T) {
	h, table := statefulHarness(t)
	var out control.Outbox
	seen, unseen := flowOf(40000), flowOf(40001)
	table.set(seen, 7)
	h.x.HandleRequest(flowRequest(seen, itrA), 4342, fromMS, &out)
	h.x.HandleRequest(flowRequest(unseen, itrA), 4342, fromMS, &out)
	h.now = h.now.Add(synWait)
	h.x.Tick()
	h.net.take()
	if c := h.x.Counters(); c.Bindings != 2 {
		t.Fatalf("counters %+v", c)
	}
	table.set(seen, 0) // RST, or FIN and the linger
	h.now = h.now.Add(sweepEvery)
	h.x.Tick()
	if c := h.x.Counters(); c.Bindings != 1 || c.Ended != 1 {
		t.Errorf("after the subflow ended: %+v", c)
	}
	h.now = h.now.Add(unseenTTL)
	h.x.Tick()
	if c := h.x.Counters(); c.Bindings != 0 || c.Expired != 1 {
		t.Errorf("after unseenTTL: %+v", c)
	}
}

// The te role's sets: a signed Map-Notify of source-specific records for
// the site's prefix is kept and acknowledged; plain requests are
// answered with the set of their source (else the one for anyone), and
// subflows bound among the ELPs of their source's set.
func TestTESets(t *testing.T) {
	h, table := statefulHarness(t)
	elp := func(hops ...string) lisp.Address {
		e := &lisp.ELP{}
		for _, a := range hops {
			e.Hops = append(e.Hops, lisp.ELPHop{Address: lisp.MustParseAddress(a), RLOCProbe: true, Strict: true})
		}
		return lisp.LCAFAddress(e)
	}
	slots := func(mine ...int) []lisp.Locator {
		var locs []lisp.Locator
		for i, a := range []string{"192.0.2.21", "192.0.2.22", "192.0.2.23"} {
			l := lisp.Locator{Priority: 255, MPriority: 255, Reachable: true, Address: elp(a, "198.51.100.1")}
			for r, m := range mine {
				if m == i {
					l.Priority, l.Weight = 1, uint8(50-r)
				}
			}
			locs = append(locs, l)
		}
		return locs
	}
	record := func(src string, locs []lisp.Locator) lisp.MapRecord {
		eid, ml := control.SourceDestAddress(0, netip.MustParsePrefix(src), netip.MustParsePrefix("10.2.0.0/16"))
		return lisp.MapRecord{TTL: 5, EID: eid, MaskLen: ml, Locators: locs}
	}
	n := &lisp.MapNotify{Nonce: 0x7e, Auth: lisp.Auth{KeyID: 3, Algorithm: lisp.AuthHMACSHA256}, Records: []lisp.MapRecord{
		record("0.0.0.0/0", slots(0, 1, 2)), record("10.1.0.0/24", slots(2, 0)),
	}}
	var out control.Outbox
	h.x.HandleNotify(sign(t, n, keyA), msA, &out)
	if out.Len() != 1 || h.x.Counters().Notifies[NotifyTESets] != 1 {
		t.Fatalf("te sets not acknowledged: %d datagrams, %v", out.Len(), h.x.Counters().Notifies)
	}
	out.Reset()

	// A plain request from site 10.1.0.0/24: its set, under the prefix.
	req := request("10.2.0.1", false, itrA)
	req.SourceEID = lisp.MustParseAddress("10.1.0.0")
	h.x.HandleRequest(req, 4342, fromMS, &out)
	_, rep := reply(t, &out)
	rec := rep.Records[0]
	if rec.EID.String() != "10.2.0.0" || rec.MaskLen != 16 || len(rec.Locators) != 3 || rec.Locators[1].Priority != 255 || rec.Locators[2].Weight != 50 {
		t.Errorf("answer to site 10.1.0.0/24 %s", rep)
	}
	// From elsewhere: the set for anyone.
	h.x.HandleRequest(request("10.2.0.1", false, itrA), 4342, fromMS, &out)
	if _, rep := reply(t, &out); rep.Records[0].Locators[1].Priority != 1 {
		t.Errorf("answer to anyone %s", rep)
	}
	// Subflows of site 10.1.0.0/24: the ELPs of its set, best first.
	for i, want := range []string{"192.0.2.23", "192.0.2.21", "192.0.2.23"} {
		f := flowOf(uint16(40000 + i))
		table.set(f, 9)
		h.x.HandleRequest(flowRequest(f, itrA), 4342, fromMS, &out)
		if _, rep := reply(t, &out); boundTo(t, rep, f) != want {
			t.Errorf("subflow %d bound to %s, want %s", i, boundTo(t, rep, f), want)
		}
	}
	if st := h.x.Status(); len(st.Mappings[0].Sets) != 2 || st.Mappings[0].Sets[0].Source != "10.1.0.0/24" {
		t.Errorf("status %+v", st.Mappings[0])
	}
	// The sets lapse with their TTL: the configured locators again.
	h.now = h.now.Add(6 * time.Minute)
	h.x.Tick()
	h.net.take()
	h.x.HandleRequest(request("10.2.0.1", false, itrA), 4342, fromMS, &out)
	if _, rep := reply(t, &out); len(rep.Records[0].Locators) != 4 {
		t.Errorf("after the TTL %s", rep)
	}
	// A set for a prefix that is not the site's is refused whole.
	bad := &lisp.MapNotify{Nonce: 0x7f, Auth: lisp.Auth{KeyID: 3, Algorithm: lisp.AuthHMACSHA256}, Records: []lisp.MapRecord{
		record("0.0.0.0/0", slots(0)),
	}}
	eid, _ := control.SourceDestAddress(0, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.3.0.0/16"))
	bad.Records = append(bad.Records, lisp.MapRecord{TTL: 5, EID: eid, Locators: slots(0)})
	h.x.HandleNotify(sign(t, bad, keyA), msA, &out)
	if out.Len() != 0 || h.x.Counters().Notifies[NotifyUnknownNonce] != 1 {
		t.Errorf("a set for another prefix acknowledged")
	}
}
