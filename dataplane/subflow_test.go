package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

// token is RFC 8684's token of an MPTCP key, as an MP_JOIN carries it.
func token(key uint64) uint32 {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, key))
	return binary.BigEndian.Uint32(sum[:4])
}

const clientKey, serverKey = 0x0102030405060708, 0x1112131415161718

var (
	rlocA = netip.MustParseAddr("198.51.100.1")
	rlocB = netip.MustParseAddr("198.51.100.2")
)

func twoPaths(upB bool) Entry {
	b := rloc("198.51.100.2", 1, 50)
	b.Up = upB
	return Entry{Paths: []Path{rloc("198.51.100.1", 1, 50), b}}
}

// sentTo is the outer destination of an encapsulated IPv4 frame.
func sentTo(t testing.TB, v uint32, out []byte) netip.Addr {
	t.Helper()
	if v != actRedirect {
		t.Fatalf("verdict %d, want redirect", v)
	}
	return netip.AddrFrom4([4]byte(out[14+16 : 14+20]))
}

func port(p uint16) netip.AddrPort { return netip.AddrPortFrom(hostA.Addr(), p) }

// Each subflow of an MPTCP connection that the local host opens gets a
// path of its own and keeps it: the MP_CAPABLE SYN takes the best path,
// the MP_JOIN (found by the token hashed from the keys of the third ACK)
// the other one; a third subflow shares the least used one.
func TestSubflowsInitiator(t *testing.T) {
	forEachHeaderRead(t, Options{}, func(t *testing.T, opts Options) {
		r := newRig(t, config.Dataplane{}, opts)
		r.put("10.2.0.0/16", twoPaths(true))

		first := r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
		r.itrTCP(port(40000), tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)})
		second := r.sendTCP(port(40001), tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
		third := r.sendTCP(port(40002), tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
		if first != rlocA || second != rlocB || third != rlocA {
			t.Fatalf("subflows sent to %s, %s, %s; want %s, %s, %s", first, second, third, rlocA, rlocB, rlocA)
		}
		// Later packets stay on their subflow's path, whatever their hash.
		for i := range 20 {
			payload := []byte{byte(i)}
			for p, want := range map[uint16]netip.Addr{40000: rlocA, 40001: rlocB, 40002: rlocA} {
				if got := r.sendTCP(port(p), tcpSeg{flags: ack, seq: uint32(i), payload: payload}); got != want {
					t.Fatalf("packet %d of subflow %d sent to %s, want %s", i, p, got, want)
				}
			}
		}
		subs := r.subflows()
		if len(subs) != 3 || subs[0].Connection != subs[1].Connection || subs[1].Connection != subs[2].Connection {
			t.Fatalf("subflows %+v", subs)
		}
		if paths := []int{subs[0].Path, subs[1].Path, subs[2].Path}; !slices.Equal(paths, []int{0, 1, 0}) ||
			!subs[0].Initiator || subs[1].Packets != 21 || time.Since(subs[0].LastSeen) > time.Minute {
			t.Errorf("subflows %+v", subs)
		}

		// Path B goes down: its subflow moves to A, and stays there when B
		// comes back (a move costs the subflow its congestion state).
		r.put("10.2.0.0/16", twoPaths(false))
		if got := r.sendTCP(port(40001), tcpSeg{flags: ack}); got != rlocA {
			t.Errorf("with B down, sent to %s", got)
		}
		r.put("10.2.0.0/16", twoPaths(true))
		if got := r.sendTCP(port(40001), tcpSeg{flags: ack}); got != rlocA {
			t.Errorf("with B back, sent to %s", got)
		}
		// A RST ends a subflow; a FIN marks it closing.
		r.itrTCP(port(40002), tcpSeg{flags: rst})
		r.itrTCP(port(40000), tcpSeg{flags: fin | ack})
		if subs := r.subflows(); len(subs) != 2 || !subs[0].Closing {
			t.Errorf("after RST and FIN: %+v", subs)
		}
		// A join naming a token nobody has is counted and still forwarded.
		r.sendTCP(port(40009), tcpSeg{flags: syn, options: mpJoinSYN(0xdeadbeef)})

		c := r.counters()
		for name, want := range map[string]uint64{
			"subflow_new": 1, "subflow_join": 2, "subflow_tokens_learned": 1, "subflow_bound": 5,
			"subflow_rebound": 1, "subflow_reset": 1, "subflow_fin": 1, "subflow_join_unknown_token": 1,
		} {
			if c[name] != want {
				t.Errorf("%s = %d, want %d (all: %v)", name, c[name], want, nonZero(c))
			}
		}
	})
}

// On the side that accepts the connection, the ETR sees the SYNs and the
// keys, and the ITR binds each subflow's replies on their first packet.
func TestSubflowsResponder(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	in := func(p uint16, s tcpSeg) {
		pkt := tcp(netip.AddrPortFrom(hostB.Addr(), p), hostA, 60, s)
		if v, _ := r.underlay(encapsulated(rlocA, ourV4, 60, lisp.DataHeader{}, pkt)); v != actOK {
			t.Fatalf("decapsulation: verdict %d", v)
		}
	}
	out := func(p uint16, s tcpSeg) netip.Addr {
		v, frame := r.run(r.dp.objs.Itr, r.eid, eth(r.ethOf(r.eid), hostMAC, ethIPv4,
			tcp(hostA, netip.AddrPortFrom(hostB.Addr(), p), 64, s)))
		return sentTo(t, v, frame)
	}
	in(50000, tcpSeg{flags: syn, options: mpCapableSYN()})
	first := out(50000, tcpSeg{flags: syn | ack, options: mpCapableSYN()})
	in(50000, tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)})
	in(50001, tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
	second := out(50001, tcpSeg{flags: syn | ack})
	if first == second {
		t.Errorf("both subflows' replies sent to %s", first)
	}
	subs := r.subflows()
	if len(subs) != 2 || subs[0].Connection != subs[1].Connection || subs[0].Initiator {
		t.Errorf("subflows %+v", subs)
	}
}

// Without MPTCP, flows spread over the paths of the best priority by
// weight, or by the sum of their ports ([A-MPTCP]).
func TestStatelessSelection(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	heavy := Entry{Paths: []Path{rloc("198.51.100.1", 1, 0), rloc("198.51.100.2", 1, 100), rloc("198.51.100.3", 2, 100)}}
	r.put("10.2.0.0/16", heavy)
	for p := range uint16(32) {
		if got := r.sendTCP(port(30000+p), tcpSeg{flags: ack}); got != rlocB {
			t.Fatalf("flow %d sent to %s: only %s has weight at the best priority", p, got, rlocB)
		}
	}
	r.put("10.2.0.0/16", twoPaths(true))
	seen := map[netip.Addr]int{}
	for p := range uint16(64) {
		seen[r.sendTCP(port(30000+p), tcpSeg{flags: ack})]++
	}
	if seen[rlocA] < 8 || seen[rlocB] < 8 {
		t.Errorf("64 flows spread %v", seen)
	}

	ps := newRig(t, config.Dataplane{PathSelection: "port-sum", MPTCPSubflows: "off"}, Options{})
	ps.put("10.2.0.0/16", twoPaths(true))
	for p := range uint16(8) {
		want := []netip.Addr{rlocA, rlocB}[(40000+p+5001)%2]
		if got := ps.sendTCP(port(40000+p), tcpSeg{flags: syn, options: mpCapableSYN()}); got != want {
			t.Errorf("source port %d: sent to %s, want %s", 40000+p, got, want)
		}
	}
}

func (r *rig) itrTCP(src netip.AddrPort, s tcpSeg) (uint32, []byte) {
	r.t.Helper()
	return r.itr(tcp(src, hostB, 64, s))
}

// sendTCP runs the ITR on a segment to hostB and returns where it went.
func (r *rig) sendTCP(src netip.AddrPort, s tcpSeg) netip.Addr {
	r.t.Helper()
	v, out := r.itrTCP(src, s)
	return sentTo(r.t, v, out)
}

func (r *rig) subflows() []Subflow {
	r.t.Helper()
	subs, err := r.dp.Subflows()
	if err != nil {
		r.t.Fatal(err)
	}
	slices.SortFunc(subs, func(a, b Subflow) int { return int(a.Local.Port()) - int(b.Local.Port()) })
	return subs
}

// The subflow hints let packets of flows that are no subflow skip the
// subflow table. A subflow is found as long as its hint was refreshed in
// the current epoch or one of the two before, by packets in either
// direction; the Go side never lets a subflow's hint get older than
// that (TestSubflowsAcrossEpochs), and this test does so by hand to show
// that the hint decides.
func TestSubflowHints(t *testing.T) {
	r := newRig(t, config.Dataplane{}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	inbound := func(s tcpSeg) {
		pkt := tcp(hostB, port(40000), 60, s)
		if v, _ := r.underlay(encapsulated(rlocA, ourV4, 60, lisp.DataHeader{}, pkt)); v != actOK {
			t.Fatalf("decapsulation: verdict %d", v)
		}
	}
	packets := func() uint64 {
		subs := r.subflows()
		if len(subs) != 1 {
			t.Fatalf("subflows %+v", subs)
		}
		return subs[0].Packets
	}

	r.advanceEpoch(2)
	inbound(tcpSeg{flags: syn | ack, options: mpCapableSYN()}) // refreshes the hint
	r.advanceEpoch(2)
	r.sendTCP(port(40000), tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)})
	if n := packets(); n != 2 {
		t.Fatalf("the subflow counted %d packets, want 2", n)
	}
	if c := r.counters(); c["subflow_tokens_learned"] != 1 {
		t.Errorf("the ETR's refresh did not keep the subflow: counters %v", nonZero(c))
	}

	// Three epochs without a packet: the ITR takes the subflow's
	// packets for a plain flow's.
	r.advanceEpoch(3)
	r.sendTCP(port(40000), tcpSeg{flags: ack})
	if n := packets(); n != 2 {
		t.Errorf("a packet with a stale hint was counted on the subflow (%d packets)", n)
	}
	// A SYN is always looked up.
	r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	r.sendTCP(port(40000), tcpSeg{flags: ack})
	if n := packets(); n != 4 {
		t.Errorf("the subflow counted %d packets after a SYN refreshed its hint, want 4", n)
	}
}

// Across many epochs, an active subflow keeps its path and every packet
// finds it; an idle one is swept, and the epoch moves on at most once
// per idle timeout.
func TestSubflowsAcrossEpochs(t *testing.T) {
	// A packet every 50 ms: a test stalled twenty times that long by a
	// busy machine is needed to look idle.
	const idle = time.Second
	r := newRig(t, config.Dataplane{SubflowIdleTimeout: config.Duration{Duration: idle}}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	first, start := r.epoch(), time.Now()
	path := r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	sent := uint64(1)
	for r.epoch() < first+4 {
		// 4 s here; more than ten times that is a stuck epoch.
		if time.Since(start) > 40*time.Second {
			t.Fatalf("the epoch moved from %d to %d in %v", first, r.epoch(), time.Since(start))
		}
		time.Sleep(idle / 20)
		if got := r.sendTCP(port(40000), tcpSeg{flags: ack, seq: uint32(sent)}); got != path {
			t.Fatalf("packet %d sent to %s, want %s", sent, got, path)
		}
		sent++
	}
	if moved, most := r.epoch()-first, uint32(time.Since(start)/idle); moved > most {
		t.Errorf("the epoch moved %d times in %v", moved, time.Since(start))
	}
	if subs := r.subflows(); len(subs) != 1 || subs[0].Packets != sent {
		t.Fatalf("after %d packets: subflows %+v", sent, subs)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(r.subflows()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle subflow was not swept: %+v", r.subflows())
		}
		time.Sleep(idle / 4)
	}
}

func (r *rig) epoch() uint32 {
	r.t.Helper()
	var e uint32
	if err := r.dp.objs.SubflowEpoch.Get(&e); err != nil {
		r.t.Fatal(err)
	}
	return e
}

// advanceEpoch moves the subflow hints' epoch on n times, without the
// sweeps that go with it in the Go side.
func (r *rig) advanceEpoch(n int) {
	r.t.Helper()
	for range n {
		if err := r.dp.nextEpoch(); err != nil {
			r.t.Fatal(err)
		}
	}
}
