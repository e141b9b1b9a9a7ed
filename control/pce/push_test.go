package pce

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// pushes records what the engine has the map-server send.
type pushes struct {
	mu  sync.Mutex
	got []pushMsg
}

func (p *pushes) push(eid mapping.EID, records []lisp.MapRecord) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, pushMsg{eid, slices.Clone(records)})
	return 1
}

func (p *pushes) take() []pushMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.got
	p.got = nil
	return out
}

// forward is a Map-Request for the site b prefix from itr that the
// map-resolver forwards to xd, which registered without proxy replies.
func forward(e *Engine, itr string) {
	reg := lisp.MapRecord{TTL: 1440, EID: lisp.IPAddress(netip.MustParseAddr("10.2.0.0")), MaskLen: 24,
		Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.IPAddress(netip.MustParseAddr(addrOf["xd"]))}}}
	req := &lisp.MapRequest{Nonce: 1, ITRRLOCs: []lisp.Address{lisp.IPAddress(netip.MustParseAddr(itr))}}
	e.Forwarded(resolver.Question{
		Answer: mapping.Answer{Kind: mapping.Forward, EID: mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/24")), Record: reg,
			ETR: netip.MustParseAddr(addrOf["xd"])},
		Request: req, From: netip.AddrPortFrom(netip.MustParseAddr(itr), 4342),
	})
}

// An ETR that answers for itself gets its prefix's sets: the record for
// anyone (every ELP in use) and, source-specific, each source site's;
// again only when they change or half a TTL later; the routers that
// asked are solicited when they change.
func TestSetsPushedToTheETR(t *testing.T) {
	e, o, now := paperLike(t, "")
	p := &pushes{}
	e.pushFn = p.push
	forward(e, addrOf["xs"])
	got := p.take()
	if len(got) != 1 || got[0].eid.String() != "10.2.0.0/24" || len(got[0].records) != 2 {
		t.Fatalf("pushed %+v, want the two records of 10.2.0.0/24", got)
	}
	for i, want := range []struct {
		src  string
		locs []string
	}{
		{"0.0.0.0/0", []string{"10.0.1.1>10.0.20.1 1/1", "10.0.2.1>10.0.20.1 1/1", "10.0.3.1>10.0.20.1 1/1"}},
		{"10.1.0.0/24", []string{"10.0.1.1>10.0.20.1 1/50", "10.0.2.1>10.0.20.1 1/49", "10.0.3.1>10.0.20.1 1/48"}},
	} {
		rec := got[0].records[i]
		_, src, dst, ok := control.SourceDestOf(rec.EID)
		if !ok || src.String() != want.src || dst.String() != "10.2.0.0/24" || rec.TTL != 5 || !slices.Equal(locators(rec), want.locs) {
			t.Errorf("record %d: %s (%s, %s) %v, want (%s, 10.2.0.0/24) %v", i, rec.EID, src, dst, locators(rec), want.src, want.locs)
		}
	}
	if smrs := o.smrs(); !slices.Contains(smrs, netip.MustParseAddrPort(addrOf["xs"]+":4342")) {
		t.Errorf("SMRs %v: xs asked and its answer changed", smrs)
	}
	// Nothing new: nothing sent; half a TTL later, the same again.
	forward(e, addrOf["xs"])
	e.Refresh(nil)
	if got := p.take(); len(got) != 0 {
		t.Errorf("pushed again without a change: %d", len(got))
	}
	*now = now.Add(150 * time.Second)
	e.Refresh(nil)
	if got := p.take(); len(got) != 1 {
		t.Errorf("after half a TTL: %d pushes", len(got))
	}
	if smrs := o.smrs(); len(smrs) != 0 {
		t.Errorf("solicited %v without a change", smrs)
	}
	st := e.Status()
	if len(st.Destinations) != 1 || len(st.Destinations[0].Pushed) != 1 || e.Counters().Pushes != 2 {
		t.Errorf("status %+v, counters %+v", st.Destinations, e.Counters())
	}
}
