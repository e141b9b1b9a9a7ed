package probe

import (
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// A reply is taken only for the probe in flight: the late answer to a
// probe that the next round counted missed is refused, and gives no RTT.
func TestLateProbeReplyRefused(t *testing.T) {
	var changes changeLog
	targets := []Target{{rtr, eid}}
	p, n, _ := newTestProber(t, &targets, &changes)
	p.Round()
	first := n.take()[0].req.Nonce
	p.Round() // the first probe is missed; a second leaves
	second := n.take()[0].req.Nonce
	if p.HandleReply(&lisp.MapReply{Probe: true, Nonce: first}, netip.AddrPortFrom(rtr, 4342)) {
		t.Error("the reply to a probe no longer in flight was taken")
	}
	if _, ok := p.RTT(rtr); ok {
		t.Error("a late reply gave an RTT")
	}
	if !p.HandleReply(&lisp.MapReply{Probe: true, Nonce: second}, netip.AddrPortFrom(rtr, 4342)) {
		t.Error("the reply to the probe in flight was refused")
	}
	if c := p.Counters(); c.Unmatched != 1 || c.Answered != 1 || c.Missed != 1 {
		t.Errorf("counters %+v", c)
	}
}
