package dataplane_test

import (
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/ethtool"
)

// With the ETRs in XDP, TCP crosses the overlay intact, and what xtrB
// delivers to its host is aggregated as plain routing delivers it: on a
// veth, XDP makes xtrA segment what it sends into MTU-sized frames (a
// NIC-like underlay), which xtrB, with GRO on, decapsulates ahead of
// GRO, so that GRO merges the inner TCP segments, where the kernel has
// no GRO for LISP.
func TestForwardingXDPAggregates(t *testing.T) {
	s := newSitesXDP(t, config.Dataplane{}, true)
	for _, name := range s.rlocB {
		if err := s.xtrB.Do(func() error { return ethtool.Set(name, ethtool.GRO, true) }); err != nil {
			t.Fatal(err)
		}
	}
	u0, h0 := s.rxB(t)
	s.transfer(t, hostA, false, 16<<20)
	u1, h1 := s.rxB(t)
	under := float64(u1[1]-u0[1]) / float64(u1[0]-u0[0])
	host := float64(h1[1]-h0[1]) / float64(h1[0]-h0[0])
	t.Logf("bytes per packet: %.0f into xtrB from the underlay, %.0f into hostB; xtrB %v", under, host, nonZero(counters(t, s.dpB)))
	if under > 1600 {
		t.Errorf("xtrB received %.0f bytes per packet from the underlay, want MTU-sized frames", under)
	}
	if host < 3*1500 {
		t.Errorf("hostB received %.0f bytes per packet, want GRO's super-packets", host)
	}
	b := counters(t, s.dpB)
	if b["etr_decapsulated_xdp"] == 0 || b["etr_decapsulated_xdp"] > b["etr_decapsulated"] ||
		b["etr_malformed"] != 0 || b["etr_decapsulation_failed"] != 0 {
		t.Errorf("xtrB %v", nonZero(b))
	}
}

// rxB counts what xtrB received from the underlay and hostB from xtrB:
// packets and bytes.
func (s *sites) rxB(t *testing.T) (under, host [2]uint64) {
	for _, name := range s.rlocB {
		st := linkStats(t, s.xtrB, name)
		under[0] += st.RxPackets
		under[1] += st.RxBytes
	}
	st := linkStats(t, s.hostB, s.siteB.Iface(s.hostB))
	return under, [2]uint64{st.RxPackets, st.RxBytes}
}
