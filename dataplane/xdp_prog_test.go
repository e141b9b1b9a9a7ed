package dataplane

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

// XDP verdicts.
const xdpPass = 2

// xdp runs underlay_xdp on an encapsulated packet from the next hop and
// returns the verdict, the frame as the program left it, and the note it
// left in front of the frame (nil when none).
func (r *rig) xdp(outer []byte) (uint32, []byte, []byte) {
	r.t.Helper()
	typ := uint16(ethIPv4)
	if outer[0]>>4 == 6 {
		typ = ethIPv6
	}
	frame := eth(r.rlocMAC, nextHopMAC, typ, outer)
	// struct xdp_md: data, data_end, data_meta, ingress_ifindex,
	// rx_queue_index, egress_ifindex; the meta data's length comes back
	// in data.
	ctx := make([]byte, 24)
	binary.NativeEndian.PutUint32(ctx[4:], uint32(len(frame)))
	ctxOut := make([]byte, 24)
	out := make([]byte, len(frame)+256)
	var ret uint32
	err := r.ns.Do(func() error {
		opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: ctx, ContextOut: ctxOut}
		var err error
		ret, err = r.dp.objs.UnderlayXdp.Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	meta := binary.NativeEndian.Uint32(ctxOut)
	if meta == 0 {
		return ret, out, nil
	}
	return ret, out[meta:], out[:meta]
}

// note is what underlay_xdp leaves for tc: its magic and the instance ID.
func note(iid uint32) []byte {
	b := binary.NativeEndian.AppendUint32(nil, 0x4c495350)
	return binary.NativeEndian.AppendUint32(b, iid)
}

// The ETR in XDP decapsulates as the tc ETR does (either family in
// either, a smaller outer TTL copied in), rewrites the Ethernet header
// in front of the inner packet, and leaves the note that tells tc it
// did, with the instance ID.
func TestXDPDecapsulates(t *testing.T) {
	r := newRig(t, config.Dataplane{XDPInterfaces: []string{"rloc0"}}, Options{})
	hdr := lisp.DataHeader{NoncePresent: true, Nonce: 0x123456, IIDPresent: true, InstanceID: 77}
	for _, tc := range []struct {
		name             string
		outer, dst       netip.Addr
		outerTTL         uint8
		inner, delivered []byte
		ethType          uint16
	}{
		{"IPv4 in IPv4", remoteRLOC, ourV4, 64, udp(hostB, hostA, 60, []byte("reply")), udp(hostB, hostA, 60, []byte("reply")), ethIPv4},
		{"IPv6 in IPv6", remoteRLOC6, ourV6, 64, udp(hostB6, hostA6, 60, []byte("reply")), udp(hostB6, hostA6, 60, []byte("reply")), ethIPv6},
		{"IPv6 in IPv4", remoteRLOC, ourV4, 64, udp(hostB6, hostA6, 60, []byte("reply")), udp(hostB6, hostA6, 60, []byte("reply")), ethIPv6},
		{"IPv4 in IPv6", remoteRLOC6, ourV6, 64, udp(hostB, hostA, 60, []byte("reply")), udp(hostB, hostA, 60, []byte("reply")), ethIPv4},
		{"outer TTL smaller", remoteRLOC, ourV4, 9, udp(hostB, hostA, 60, []byte("reply")), udp(hostB, hostA, 9, []byte("reply")), ethIPv4},
		{"outer hop limit smaller", remoteRLOC6, ourV6, 9, udp(hostB6, hostA6, 60, []byte("reply")), udp(hostB6, hostA6, 9, []byte("reply")), ethIPv6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, out, meta := r.xdp(encapsulated(tc.outer, tc.dst, tc.outerTTL, hdr, tc.inner))
			if v != xdpPass {
				t.Fatalf("verdict %d, want pass", v)
			}
			if want := eth(r.rlocMAC, nextHopMAC, tc.ethType, tc.delivered); !bytes.Equal(out, want) {
				t.Errorf("frame:\n got %x\nwant %x", out, want)
			}
			if !bytes.Equal(meta, note(77)) {
				t.Errorf("meta data %x, want the note %x", meta, note(77))
			}
		})
	}
	if c := r.counters(); c["etr_decapsulated"] != 6 || c["etr_decapsulated_xdp"] != 6 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// What the XDP ETR does not take passes to tc untouched, without a
// note: packets for others, other traffic, outer options and fragments,
// malformed packets (tc counts and drops them), and what an RTR sends on
// or has no mapping for.
func TestXDPLeavesTheRestToTC(t *testing.T) {
	r := newRig(t, config.Dataplane{EIDInterfaces: []string{}, XDPInterfaces: []string{"rloc0"}}, Options{RTR: true})
	r.put("10.2.0.0/16", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1", "203.0.113.20")}})
	r.put("10.1.0.0/24", Entry{Paths: []Path{elp(1, 50, "198.51.100.10", "192.0.2.1")}})
	inner := udp(hostB, hostA, 60, []byte("x"))
	options := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, inner)
	options = append(append(append([]byte{0x46}, options[1:20]...), 1, 1, 1, 0), options[20:]...) // IHL 6, NOPs
	binary.BigEndian.PutUint16(options[2:], uint16(len(options)))
	fragment := encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, inner)
	fragment[6] |= 0x20 // MF
	for name, pkt := range map[string][]byte{
		"not for our RLOC": encapsulated(remoteRLOC, netip.MustParseAddr("192.0.2.9"), 64, lisp.DataHeader{}, inner),
		"not UDP 4341":     udp(netip.AddrPortFrom(remoteRLOC, 4342), netip.AddrPortFrom(ourV4, 4342), 64, []byte("control")),
		"outer options":    options,
		"outer fragment":   fragment,
		"short header":     encap(remoteRLOC, ourV4, 0xc123, 64, 0, []byte{0x80, 0, 0}, nil),
		"inner not IP":     encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, []byte{0x50, 1, 2, 3, 4, 5, 6, 7}),
		"inner cut":        encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, inner[:12]),
		"RTR sends it on":  encapsulated(netip.MustParseAddr("198.51.100.10"), ourV4, 64, lisp.DataHeader{}, udp(hostA, hostB, 60, []byte("x"))),
		"RTR has no entry": encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, udp(hostA, netip.MustParseAddrPort("10.9.0.1:53"), 60, []byte("x"))),
	} {
		v, out, meta := r.xdp(pkt)
		if v != xdpPass || !bytes.Equal(out[14:], pkt) || meta != nil {
			t.Errorf("%s: verdict %d, changed %v, meta data %x", name, v, !bytes.Equal(out[14:], pkt), meta)
		}
	}
	// The last hop of an ELP decapsulates in XDP.
	if v, out, meta := r.xdp(encapsulated(remoteRLOC, ourV4, 64, lisp.DataHeader{}, inner)); v != xdpPass || !bytes.Equal(out[14:], inner) || meta == nil {
		t.Errorf("last hop: verdict %d, decapsulated %v, meta data %x", v, bytes.Equal(out[14:], inner), meta)
	}
	if c := r.counters(); c["etr_decapsulated_xdp"] != 1 || c["rtr_miss"] != 0 || c["rtr_ambiguous"] != 0 {
		t.Errorf("counters %v", nonZero(c))
	}
}

// xdpProgram is the ID of the XDP program attached to an interface of
// the rig, 0 for none.
func (r *rig) xdpProgram(ifindex int) uint32 {
	r.t.Helper()
	var id uint32
	err := r.ns.Do(func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
			id = l.Attrs().Xdp.ProgId
		}
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// A restart replaces the XDP program in its link, as it does the tc
// programs; one whose configuration no longer names the interface in
// xdp-interfaces detaches it.
func TestRestartWithXDP(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins, XDPInterfaces: []string{"rloc0"}}, Options{})
	before := r.xdpProgram(r.rloc)
	if before == 0 || before != uint32(programID(t, r.dp.objs.UnderlayXdp)) {
		t.Fatalf("XDP program %d on rloc0, want %d", before, programID(t, r.dp.objs.UnderlayXdp))
	}
	if err := r.dp.Keep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pins, "xdp-"+strconv.Itoa(r.rloc))); err != nil {
		t.Errorf("XDP link not pinned: %v", err)
	}
	if got := r.xdpProgram(r.rloc); got != before {
		t.Errorf("after Keep: XDP program %d, want %d still", got, before)
	}
	dp, err := r.restart(config.Dataplane{PinPath: pins, XDPInterfaces: []string{"rloc0"}})
	if err != nil {
		t.Fatal(err)
	}
	if a := dp.Adoption(); a == nil || a.Links != 4 || a.Detached != 0 { // with the GRO device's
		t.Errorf("adoption %+v", a)
	}
	if got := r.xdpProgram(r.rloc); got == before || got != uint32(programID(t, dp.objs.UnderlayXdp)) {
		t.Errorf("after the restart: XDP program %d, want the new one, %d", got, programID(t, dp.objs.UnderlayXdp))
	}

	if err := dp.Keep(); err != nil {
		t.Fatal(err)
	}
	dp, err = r.restart(config.Dataplane{PinPath: pins})
	if err != nil {
		t.Fatal(err)
	}
	if a := dp.Adoption(); a == nil || a.Links != 3 || a.Detached != 1 {
		t.Errorf("adoption %+v", a)
	}
	// The kernel frees the link in a work queue.
	for deadline := time.Now().Add(10 * time.Second); r.xdpProgram(r.rloc) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("XDP program %d left on rloc0", r.xdpProgram(r.rloc))
		}
	}
}
