package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

// event waits for the next subflow event.
func (r *rig) event() SubflowEvent {
	r.t.Helper()
	select {
	case ev := <-r.dp.SubflowEvents():
		return ev
	case <-time.After(5 * time.Second):
		r.t.Fatal("no subflow event")
	}
	return SubflowEvent{}
}

func (r *rig) noEvent() {
	r.t.Helper()
	select {
	case ev := <-r.dp.SubflowEvents():
		r.t.Fatalf("unexpected subflow event %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

// With bind-stateful, the ITR reports each subflow it binds for the
// first time and sends it on meanwhile (the SYN is not held); the path
// pinned for it takes over from its next packet, if usable.
func TestStatefulPins(t *testing.T) {
	r := newRig(t, config.Dataplane{MPTCPSubflows: "bind-stateful"}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))

	if got := r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()}); got != rlocA {
		t.Fatalf("the SYN was sent to %s, want %s: the stateless choice", got, rlocA)
	}
	ev := r.event()
	want := Flow{InstanceID: 0, Local: port(40000), Remote: hostB}
	if ev.Flow != want || ev.Path != 0 || !ev.Initiator || ev.Connection == 0 {
		t.Fatalf("event %+v, want the flow %s on path 0 from the initiator", ev, want)
	}
	if subs := r.subflows(); len(subs) != 1 || !subs[0].Asked || subs[0].Pinned {
		t.Fatalf("subflow %+v, want asked and not pinned", subs)
	}
	// Until the pin comes, it stays; then it moves, and stays.
	if got := r.sendTCP(port(40000), tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)}); got != rlocA {
		t.Errorf("before the pin, sent to %s", got)
	}
	if err := r.dp.Pin(ev.Flow, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := r.sendTCP(port(40000), tcpSeg{flags: ack, seq: uint32(i)}); got != rlocB {
			t.Errorf("packet %d after the pin sent to %s, want %s", i, got, rlocB)
		}
	}
	sf, ok, err := r.dp.Subflow(ev.Flow)
	if err != nil || !ok || !sf.Pinned || sf.Asked || sf.Path != 1 {
		t.Fatalf("Subflow(%s) = %+v %v %v", ev.Flow, sf, ok, err)
	}

	// The join is bound to the least used path (A), then pinned to a
	// path that is down: refused, it stays on A.
	r.put("10.2.0.0/16", twoPaths(false))
	r.sendTCP(port(40001), tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
	join := r.event()
	if join.Path != 0 || join.Connection != ev.Connection {
		t.Errorf("join event %+v, want path 0 of connection %d", join, ev.Connection)
	}
	r.dp.Pin(join.Flow, 1)
	if got := r.sendTCP(port(40001), tcpSeg{flags: ack}); got != rlocA {
		t.Errorf("pinned to a path that is down, sent to %s", got)
	}
	// A subflow the control plane gives up on stays; one not asked
	// about ignores pins.
	r.put("10.2.0.0/16", twoPaths(true))
	r.sendTCP(port(40002), tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
	third := r.event()
	r.dp.Pin(third.Flow, NoPin)
	first := r.sendTCP(port(40002), tcpSeg{flags: ack})
	if sf, _, _ := r.dp.Subflow(third.Flow); sf.Asked || sf.Pinned {
		t.Errorf("given up: %+v", sf)
	}
	r.dp.Pin(third.Flow, 1-sf.Path)
	if got := r.sendTCP(port(40002), tcpSeg{flags: ack}); got != first {
		t.Errorf("a pin after giving up moved the subflow from %s to %s", first, got)
	}
	c := r.counters()
	for name, want := range map[string]uint64{"subflow_asked": 3, "subflow_pinned": 1, "subflow_pin_refused": 2, "subflow_ask_lost": 0} {
		if c[name] != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, c[name], want, nonZero(c))
		}
	}
	if err := r.dp.Pin(ev.Flow, MaxPaths); err == nil {
		t.Error("a pin beyond the paths accepted")
	}
}

// The side that accepts the connection asks on the first packet its ITR
// binds, the SYN-ACK: the reverse direction is bound by the ETR of the
// other side. Without bind-stateful nothing is reported.
func TestStatefulResponder(t *testing.T) {
	r := newRig(t, config.Dataplane{MPTCPSubflows: "bind-stateful"}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	remote := netip.AddrPortFrom(hostB.Addr(), 50000)
	if v, _ := r.underlay(encapsulated(rlocA, ourV4, 60, lisp.DataHeader{}, tcp(remote, hostA, 60, tcpSeg{flags: syn, options: mpCapableSYN()}))); v != actOK {
		t.Fatalf("decapsulation: verdict %d", v)
	}
	r.noEvent()
	r.itr(tcp(hostA, remote, 64, tcpSeg{flags: syn | ack, options: mpCapableSYN()}))
	ev := r.event()
	if ev.Initiator || ev.Flow != (Flow{Local: hostA, Remote: remote}) {
		t.Errorf("event %+v, want the accepted subflow", ev)
	}

	plain := newRig(t, config.Dataplane{}, Options{})
	plain.put("10.2.0.0/16", twoPaths(true))
	plain.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	plain.noEvent()
	if c := plain.counters(); c["subflow_asked"] != 0 || c["subflow_bound"] != 1 {
		t.Errorf("bind: %v", nonZero(c))
	}
}
