package dataplane_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/ethtool"
	"github.com/amptcp/amptcp/internal/inet"
	"github.com/amptcp/amptcp/lisp"
)

// gpeSites are the forwarding tests' sites with LISP-GPE between the
// xTRs, over a NIC-like underlay: xtrA segments what it sends into
// MTU-sized frames (TSO and GSO off), and xtrB has GRO on.
func gpeSites(t *testing.T) *sites {
	s := newSites(t, config.Dataplane{LISPGPE: config.LISPGPE{Peers: []string{"192.0.2.0/24"}}})
	for i := range s.rlocA {
		err := s.xtrA.Do(func() error {
			if err := ethtool.Set(s.rlocA[i], ethtool.TSO, false); err != nil {
				return err
			}
			return ethtool.Set(s.rlocA[i], ethtool.GSO, false)
		})
		if err == nil {
			err = s.xtrB.Do(func() error { return ethtool.Set(s.rlocB[i], ethtool.GRO, true) })
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// With LISP-GPE between the xTRs, TCP crosses an underlay of MTU-sized
// frames intact, and xtrB's kernel aggregates them before its ETR
// decapsulates: the ETR takes a packet for many frames, and hostB gets
// GRO's super-packets, as from plain routing.
func TestForwardingLISPGPEAggregates(t *testing.T) {
	s := gpeSites(t)
	u0, h0 := s.rxB(t)
	before := counters(t, s.dpB)["etr_decapsulated"]
	s.transfer(t, hostA, false, 16<<20)
	u1, h1 := s.rxB(t)
	frames := u1[0] - u0[0]
	under := float64(u1[1]-u0[1]) / float64(frames)
	host := float64(h1[1]-h0[1]) / float64(h1[0]-h0[0])
	a, b := counters(t, s.dpA), counters(t, s.dpB)
	decapsulated := b["etr_decapsulated"] - before
	t.Logf("bytes per packet: %.0f into xtrB from the underlay, %.0f into hostB; %d frames, %d decapsulations; xtrA %v; xtrB %v",
		under, host, frames, decapsulated, nonZero(a), nonZero(b))
	if under > 1600 {
		t.Errorf("xtrB received %.0f bytes per packet from the underlay, want MTU-sized frames", under)
	}
	if a["itr_encapsulated_gpe"] == 0 || a["itr_encapsulated_gpe"] != a["itr_encapsulated"] {
		t.Errorf("xtrA sent %d packets with LISP-GPE of %d", a["itr_encapsulated_gpe"], a["itr_encapsulated"])
	}
	// Unaggregated, each frame of the transfer (at least 11,000 of them)
	// would be decapsulated alone.
	if decapsulated == 0 || 3*decapsulated > frames {
		t.Errorf("xtrB decapsulated %d packets for %d frames: GRO did not aggregate them", decapsulated, frames)
	}
	if host < 3*1500 {
		t.Errorf("hostB received %.0f bytes per packet, want GRO's super-packets", host)
	}
	if b["etr_malformed"] != 0 || b["etr_decapsulation_failed"] != 0 || b["etr_not_ip"] != 0 || b["gro_device_dropped"] != 0 {
		t.Errorf("xtrB %v", nonZero(b))
	}
}

// What reaches the GRO device's socket itself, LISP-GPE to an address of
// xtrB that no RLOC interface's program takes (here from its own site),
// is dropped and counted: the kernel would decapsulate it and deliver
// the inner packet, here a datagram to xtrB itself from an address no one
// checked, around the ETR. (The kernel drops one without the I bit,
// which VXLAN's header always has, before the device.)
func TestGRODeviceDropsWhatItsSocketTakes(t *testing.T) {
	s := gpeSites(t)
	hdr, err := (&lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv4, IIDPresent: true, InstanceID: 7}).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := make([]byte, 20+8+len("spoofed"))
	copy(inner[28:], "spoofed")
	if err := inet.PutUDP(inner, netip.MustParseAddrPort("10.9.0.1:7"), netip.MustParseAddrPort("10.2.0.254:7777"), 64, 0); err != nil {
		t.Fatal(err)
	}
	victim, err := s.xtrB.ListenUDP("udp", "10.2.0.254:7777")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	var c net.Conn
	err = s.hostB.Do(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(context.Background(), "udp", "10.2.0.254:4341")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); counters(t, s.dpB)["gro_device_dropped"] == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("nothing dropped at the GRO device; xtrB %v", nonZero(counters(t, s.dpB)))
		}
		if _, err := c.Write(append(hdr, inner...)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b := counters(t, s.dpB); b["etr_decapsulated"] != 0 {
		t.Errorf("xtrB %v", nonZero(b))
	}
	victim.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, from, err := victim.ReadFrom(make([]byte, 100)); err == nil {
		t.Errorf("xtrB received %d bytes from %s through the GRO device", n, from)
	}
}
