package dataplane

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/lispgro"
	"github.com/amptcp/amptcp/lisp"
)

// The ITR sends LISP-GPE to the RLOCs of lisp-gpe.peers, naming the
// payload and carrying no nonce (so that a flow's packets have equal
// headers), and RFC 9300's header, with a nonce, to every other RLOC.
func TestITRSendsLISPGPEToItsPeers(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{InstanceID: 7, LISPGPE: config.LISPGPE{Peers: []string{"198.51.100.0/24", "2001:db8:9::1"}}}, opts)
		iid := func(p string) Key { return Key{InstanceID: 7, Prefix: netip.MustParsePrefix(p)} }
		for k, e := range map[Key]Entry{
			iid("10.2.0.0/16"): {Paths: []Path{rloc("198.51.100.1", 1, 100)}},
			iid("fd02::/16"):   {Paths: []Path{rloc("2001:db8:9::1", 1, 100)}},
			iid("10.3.0.0/16"): {Paths: []Path{rloc("203.0.113.1", 1, 100)}}, // no peer
			iid("10.6.0.0/16"): {Paths: []Path{rloc("2001:db8:9::1", 1, 100)}},
		} {
			if err := r.dp.Put(k, e); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name     string
			src, dst netip.AddrPort
			want     lisp.DataHeader
		}{
			{"IPv4 in IPv4", hostA, hostB, lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv4, IIDPresent: true, InstanceID: 7}},
			{"IPv6 in IPv6", hostA6, hostB6, lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv6, IIDPresent: true, InstanceID: 7}},
			{"IPv4 in IPv6", hostA, netip.MustParseAddrPort("10.6.0.1:5001"),
				lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv4, IIDPresent: true, InstanceID: 7}},
			{"not a peer", hostA, netip.MustParseAddrPort("10.3.0.1:5001"), lisp.DataHeader{NoncePresent: true, IIDPresent: true, InstanceID: 7}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				verdict, out := r.itr(udp(tc.src, tc.dst, 63, []byte("x")))
				if verdict != actRedirect {
					t.Fatalf("verdict %d; counters %v", verdict, nonZero(r.counters()))
				}
				off := 14 + 28
				if out[14]>>4 == 6 {
					off = 14 + 48
				}
				var h lisp.DataHeader
				if err := h.DecodeFromBytes(out[off:]); err != nil {
					t.Fatal(err)
				}
				h.Nonce = 0 // random
				if h != tc.want {
					t.Errorf("header %v, want %v", &h, &tc.want)
				}
			})
		}
		if c := r.counters(); c["itr_encapsulated"] != 4 || c["itr_encapsulated_gpe"] != 3 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// The ETR takes LISP-GPE whose payload is IP; any other payload has no
// place behind it and is dropped, counted, and a header that names
// another family than the packet's is malformed.
func TestETRTakesLISPGPE(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		gpe := func(next lisp.NextProtocol) lisp.DataHeader { return lisp.DataHeader{GPE: true, NextProtocol: next} }
		v4, v6 := udp(hostB, hostA, 60, []byte("reply")), udp(hostB6, hostA6, 60, []byte("reply"))
		for _, tc := range []struct {
			name    string
			hdr     lisp.DataHeader
			inner   []byte
			verdict uint32
			ethType uint16
		}{
			{"IPv4", gpe(lisp.NextIPv4), v4, actOK, ethIPv4},
			{"IPv6, with a 16-bit nonce", lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv6, NoncePresent: true, Nonce: 0xabcd}, v6, actOK, ethIPv6},
			{"Ethernet", gpe(lisp.NextEthernet), eth(hostMAC, nextHopMAC, ethIPv4, v4), actShot, 0},
			{"NSH", gpe(lisp.NextNSH), v4, actShot, 0},
			{"IPv6 named, IPv4 inside", gpe(lisp.NextIPv6), v4, actShot, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				v, out := r.underlay(encapsulated(remoteRLOC, ourV4, 64, tc.hdr, tc.inner))
				if v != tc.verdict {
					t.Fatalf("verdict %d, want %d; counters %v", v, tc.verdict, nonZero(r.counters()))
				}
				if v == actOK && !bytes.Equal(out, eth(r.rlocMAC, nextHopMAC, tc.ethType, tc.inner)) {
					t.Errorf("frame %x", out)
				}
			})
		}
		if c := r.counters(); c["etr_decapsulated"] != 2 || c["etr_not_ip"] != 2 || c["etr_malformed"] != 1 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// An RTR sends on with the header its next hop takes: LISP-GPE to a peer,
// RFC 9300's to another router, whatever came in; the instance ID and
// the path ID stay.
func TestRTRSpeaksWhatTheNextHopTakes(t *testing.T) {
	forEachHeaderRead(t, Options{RTR: true}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{EIDInterfaces: []string{}, LISPGPE: config.LISPGPE{Peers: []string{"203.0.113.20"}}}, opts)
		err := r.dp.Put(Key{InstanceID: 5, Prefix: netip.MustParsePrefix("10.2.0.0/16")}, Entry{Paths: []Path{
			elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20", "203.0.113.1"), // on to a peer
			elp(1, 50, "198.51.100.11", "192.0.2.1", "203.0.113.21", "203.0.113.1"), // on to another
		}})
		if err != nil {
			t.Fatal(err)
		}
		inner := udp(hostA, hostB, 60, []byte("x"))
		plain := lisp.DataHeader{NoncePresent: true, Nonce: 0xabcdef, IIDPresent: true, InstanceID: 5}
		gpe := lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv4, IIDPresent: true, InstanceID: 5}
		for _, tc := range []struct {
			name     string
			in, want lisp.DataHeader
			path     uint8
		}{
			{"RFC 9300 to a peer", plain, gpe, 1},
			{"LISP-GPE to a peer", gpe, gpe, 1},
			{"LISP-GPE to another router", gpe, lisp.DataHeader{IIDPresent: true, InstanceID: 5}, 2},
			{"RFC 9300 to another router", plain, plain, 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.in.LSBs, tc.want.LSBs = uint32(tc.path), uint32(tc.path) // the path ID
				v, out := r.underlay(encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 30, tc.in, inner))
				if v != actRedirect {
					t.Fatalf("verdict %d; counters %v", v, nonZero(r.counters()))
				}
				var h lisp.DataHeader
				if err := h.DecodeFromBytes(out[14+28:]); err != nil {
					t.Fatal(err)
				}
				if h != tc.want {
					t.Errorf("header %v, want %v", &h, &tc.want)
				}
				if !bytes.Equal(out[14+36:], inner) {
					t.Errorf("inner packet changed")
				}
			})
		}
		if c := r.counters(); c["rtr_reencapsulated"] != 4 || c["rtr_reencapsulated_gpe"] != 2 {
			t.Errorf("counters %v", nonZero(c))
		}
	})
}

// The XDP ETR decapsulates LISP-GPE of IP and leaves other payloads to
// tc, untouched.
func TestXDPTakesLISPGPE(t *testing.T) {
	r := newRig(t, config.Dataplane{XDPInterfaces: []string{"rloc0"}}, Options{})
	inner := udp(hostB, hostA, 60, []byte("reply"))
	ip := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv4}, inner)
	if v, out, meta := r.xdp(ip); v != xdpPass || !bytes.Equal(out[14:], inner) || meta == nil {
		t.Errorf("IPv4: verdict %d, frame %x, note %x", v, out, meta)
	}
	other := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{GPE: true, NextProtocol: lisp.NextIPv6}, inner)
	if v, out, meta := r.xdp(other); v != xdpPass || !bytes.Equal(out[14:], other) || meta != nil {
		t.Errorf("IPv6 named, IPv4 inside: verdict %d, frame %x, note %x", v, out, meta)
	}
	if c := r.counters(); c["etr_decapsulated_xdp"] != 1 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// lispd keeps its GRO device while it runs, with gro_sink on its ingress,
// and removes it when it stops for good; with gro: false it makes none.
func TestGRODevice(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	var ifindex int
	err := r.ns.Do(func() error {
		l, err := lispgro.Find(lispgro.Name)
		if err == nil && l != nil {
			ifindex = l.Attrs().Index
		}
		return err
	})
	if err != nil || ifindex == 0 || r.dp.gro == nil || r.dp.gro.ifc.Index != ifindex {
		t.Fatalf("GRO device: %d, %v (data plane's %+v)", ifindex, err, r.dp.gro)
	}
	if _, progs := r.attachedTo(ifindex); len(progs) != 1 {
		t.Errorf("programs on %s: %v, want gro_sink", lispgro.Name, progs)
	}
	r.dp.Close()
	r.ns.Do(func() error {
		if l, err := lispgro.Find(lispgro.Name); l != nil || err != nil {
			t.Errorf("after Close: %v, %v", l, err)
		}
		return nil
	})

	off := false
	r = newRig(t, config.Dataplane{LISPGPE: config.LISPGPE{GRO: &off}}, Options{})
	r.ns.Do(func() error {
		if l, err := lispgro.Find(lispgro.Name); l != nil || err != nil || r.dp.gro != nil {
			t.Errorf("gro: false: %v, %v", l, err)
		}
		return nil
	})

	// Another device of that name is no GRO device: lispd runs without
	// GRO, and leaves the device alone, with GRO on or off.
	r.dp.Close()
	err = r.ns.Do(func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: lispgro.Name}, PeerName: "lispgrop"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []config.Dataplane{{}, {LISPGPE: config.LISPGPE{GRO: &off}}} {
		dp, err := r.restart(cfg)
		if err != nil || dp.gro != nil {
			t.Fatalf("with a veth named %s (gro %v): %v, %+v", lispgro.Name, cfg.LISPGPE.GROOn(), err, dp)
		}
		dp.Close()
		r.ns.Do(func() error {
			if l, err := netlink.LinkByName(lispgro.Name); err != nil || l.Type() != "veth" {
				t.Errorf("the veth named %s: %v, %v", lispgro.Name, l, err)
			}
			return nil
		})
	}
}
