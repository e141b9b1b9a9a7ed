package mapcache

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

func statefulHarness(t *testing.T) (*harness, *fakePins) {
	t.Helper()
	pins := &fakePins{}
	h := newHarnessWith(t, oneResolver, func(o *Options) {
		o.Pinner = pins
		o.SiteEIDs = func() []dataplane.Key { return []dataplane.Key{key("2001:db8:a::/48"), key("10.1.0.0/24")} }
	})
	// The destination's entry: two ELPs, through 192.0.2.1 and .2.
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
	_, _, req := h.request(t)
	if req.SourceEID.IP() != netip.MustParseAddr("10.1.0.0") {
		t.Errorf("a miss's source EID %s, want the site's prefix of the family", req.SourceEID)
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{record("10.2.0.0/16", 60,
		elpLocator(1, "192.0.2.1", "192.0.2.9"), elpLocator(1, "192.0.2.2", "192.0.2.9"))}}, etrAddr)
	return h, pins
}

func subflowEvent(port uint16) dataplane.SubflowEvent {
	return dataplane.SubflowEvent{Flow: dataplane.Flow{
		Local: netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), port), Remote: netip.MustParseAddrPort("10.2.0.1:5201"),
	}, Initiator: true}
}

// Each new subflow the data plane reports is asked for with an
// Application Data Map-Request from its host; the answer's one ELP is
// found among the destination's paths, by its hops, and the subflow
// pinned to it.
func TestStatefulRequest(t *testing.T) {
	h, pins := statefulHarness(t)
	ev := subflowEvent(40000)
	h.c.Subflow(ev)
	h.c.Subflow(ev) // reported twice: asked once
	dst, ecm, req := h.request(t)
	flow := control.Flow{Protocol: 6, Source: ev.Flow.Local, Dest: ev.Flow.Remote}
	if dst != resolverA || !flow.Is(req.Records[0].EID) || req.Records[0].MaskLen != 32 ||
		req.SourceEID.IP() != netip.MustParseAddr("10.1.0.1") || ecm.Destination.Addr() != netip.MustParseAddr("10.2.0.1") {
		t.Fatalf("stateful request to %s: %s", dst, req)
	}
	// The ETR's answer: the record of the flow, one ELP.
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{{
		EID: control.FlowAddress(flow), MaskLen: 32, TTL: 10, Locators: []lisp.Locator{elpLocator(1, "192.0.2.2", "192.0.2.9")},
	}}}, etrAddr)
	if got := pins.take(); !slices.Equal(got, []string{"10.1.0.1:40000 1"}) {
		t.Errorf("pins %v, want the subflow on path 1", got)
	}
	// The binding did not replace the destination's entry.
	if e, _ := h.dp.get(key("10.2.0.0/16")); len(e.Paths) != 2 {
		t.Errorf("entry %+v", e)
	}
	if c := h.c.Counters(); c.FlowEvents != 2 || c.FlowRequests != 1 || c.FlowPinned != 1 || c.Pending != 0 {
		t.Errorf("counters %+v", c)
	}
}

// An ELP the destination's entry does not hold has the entry asked for
// again (SMR-like, replacing it) and the subflow pinned when it comes;
// one that never comes leaves the subflow where it was.
func TestStatefulRequestRefetches(t *testing.T) {
	h, pins := statefulHarness(t)
	ev := subflowEvent(40001)
	h.c.Subflow(ev)
	_, _, req := h.request(t)
	flow := control.Flow{Protocol: 6, Source: ev.Flow.Local, Dest: ev.Flow.Remote}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{{
		EID: control.FlowAddress(flow), MaskLen: 32, TTL: 10, Locators: []lisp.Locator{elpLocator(1, "192.0.2.3", "192.0.2.9")},
	}}}, etrAddr)
	if got := pins.take(); len(got) != 0 {
		t.Fatalf("pinned %v before the ELP is known", got)
	}
	h.c.Tick()
	h.answer(t, "10.2.0.1", record("10.2.0.0/16", 60, elpLocator(1, "192.0.2.1", "192.0.2.9"),
		elpLocator(1, "192.0.2.2", "192.0.2.9"), elpLocator(1, "192.0.2.3", "192.0.2.9")))
	if got := pins.take(); !slices.Equal(got, []string{"10.1.0.1:40001 2"}) {
		t.Errorf("pins %v, want path 2 once the entry has it", got)
	}

	// Another binding to an ELP that never comes: given up after a while.
	ev = subflowEvent(40002)
	h.c.Subflow(ev)
	_, _, req = h.request(t)
	flow.Source = ev.Flow.Local
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{{
		EID: control.FlowAddress(flow), MaskLen: 32, TTL: 10, Locators: []lisp.Locator{elpLocator(1, "192.0.2.4", "192.0.2.9")},
	}}}, etrAddr)
	h.c.Tick()
	h.net.take()
	h.clk.advance(pinWait + time.Second)
	h.c.Tick()
	if got := pins.take(); !slices.Equal(got, []string{"10.1.0.1:40002 -1"}) {
		t.Errorf("pins %v, want the subflow left where it is", got)
	}
}

// An answer that binds nothing (an ETR that does not bind answers for
// its prefix, a map-server answers for it) is installed as any answer,
// and the subflow stays; so does one whose request had no answer.
func TestStatefulRequestUnbound(t *testing.T) {
	h, pins := statefulHarness(t)
	h.c.Subflow(subflowEvent(40003))
	_, _, req := h.request(t)
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: []lisp.MapRecord{record("10.2.0.0/16", 60,
		elpLocator(1, "192.0.2.1", "192.0.2.9"))}}, etrAddr)
	if got := pins.take(); !slices.Equal(got, []string{"10.1.0.1:40003 -1"}) {
		t.Errorf("pins %v", got)
	}
	if e, _ := h.dp.get(key("10.2.0.0/16")); len(e.Paths) != 1 {
		t.Errorf("the prefix's answer not installed: %+v", e)
	}
	h.c.Subflow(subflowEvent(40004))
	for range 3 {
		h.request(t)
		h.clk.advance(time.Second)
		h.c.Tick()
	}
	if got := pins.take(); !slices.Equal(got, []string{"10.1.0.1:40004 -1"}) {
		t.Errorf("pins %v after no answer", got)
	}
	if c := h.c.Counters(); c.FlowUnbound != 1 || c.Failed != 1 || c.Retried != 2 {
		t.Errorf("counters %+v", c)
	}
}
