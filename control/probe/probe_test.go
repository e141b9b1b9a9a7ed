package probe

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

type sent struct {
	dst netip.AddrPort
	req *lisp.MapRequest
}

type fakeNet struct {
	t   *testing.T
	mu  sync.Mutex
	out []sent
}

func (n *fakeNet) Send(dst netip.AddrPort, b []byte) error {
	var req lisp.MapRequest
	if err := req.DecodeFromBytes(b); err != nil {
		n.t.Errorf("sent something that is not a Map-Request: %v", err)
		return err
	}
	n.mu.Lock()
	n.out = append(n.out, sent{dst, &req})
	n.mu.Unlock()
	return nil
}

func (n *fakeNet) take() []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.out
	n.out = nil
	return out
}

type changeLog struct {
	mu      sync.Mutex
	changes []change
}

func (c *changeLog) add(a netip.Addr, up bool) {
	c.mu.Lock()
	c.changes = append(c.changes, change{a, up})
	c.mu.Unlock()
}

func (c *changeLog) take() []change {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.changes
	c.changes = nil
	return out
}

var (
	local4 = netip.MustParseAddr("198.51.100.1")
	local6 = netip.MustParseAddr("2001:db8:1::1")
	rtr    = netip.MustParseAddr("192.0.2.11")
	etr6   = netip.MustParseAddr("2001:db8:2::1")
	eid    = mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/16"))
)

func newTestProber(t *testing.T, targets *[]Target, changes *changeLog) (*Prober, *fakeNet, *time.Time) {
	t.Helper()
	n := &fakeNet{t: t}
	now := time.Unix(1_700_000_000, 0)
	p, err := New(Options{
		Interval: time.Second, Misses: 3, Sender: n,
		LocalRLOCs: func() []netip.Addr { return []netip.Addr{local6, local4} },
		Targets:    func() []Target { return *targets },
		OnChange:   changes.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.SetClock(func() time.Time { return now })
	return p, n, &now
}

func TestProbesAndRTT(t *testing.T) {
	var changes changeLog
	targets := []Target{{rtr, eid}, {etr6, eid}, {rtr, eid}, {local4, eid}}
	p, n, now := newTestProber(t, &targets, &changes)
	p.Round()
	out := n.take()
	if len(out) != 2 {
		t.Fatalf("%d probes, want one per distinct locator that is not ours: %v", len(out), out)
	}
	byAddr := map[netip.Addr]*lisp.MapRequest{}
	for _, s := range out {
		if s.dst.Port() != 4342 {
			t.Errorf("probe to %s, want port 4342", s.dst)
		}
		byAddr[s.dst.Addr()] = s.req
	}
	req := byAddr[rtr]
	if req == nil || !req.Probe || req.SMR || req.Nonce == 0 || len(req.Records) != 1 ||
		req.Records[0].EID.IP() != netip.MustParseAddr("10.1.0.0") || req.Records[0].MaskLen != 16 {
		t.Fatalf("probe of %s: %v", rtr, req)
	}
	// The ITR-RLOCs of the probed locator's family come first.
	if req.ITRRLOCs[0].IP() != local4 || byAddr[etr6].ITRRLOCs[0].IP() != local6 {
		t.Errorf("ITR-RLOCs %v and %v", req.ITRRLOCs, byAddr[etr6].ITRRLOCs)
	}
	*now = now.Add(30 * time.Millisecond)
	if !p.HandleReply(&lisp.MapReply{Probe: true, Nonce: req.Nonce}, netip.AddrPortFrom(rtr, 4342)) {
		t.Fatal("the reply to a probe was not taken")
	}
	if rtt, ok := p.RTT(rtr); !ok || rtt != 30*time.Millisecond {
		t.Errorf("RTT = %v, %v", rtt, ok)
	}
	// The same reply again, or one with a nonce never sent: not taken.
	if p.HandleReply(&lisp.MapReply{Probe: true, Nonce: req.Nonce}, netip.AddrPortFrom(rtr, 4342)) ||
		p.HandleReply(&lisp.MapReply{Probe: true, Nonce: 12345}, netip.AddrPortFrom(rtr, 4342)) {
		t.Error("a reply matching no probe in flight was taken")
	}
	p.Round()
	for _, s := range n.take() {
		if s.dst.Addr() == rtr {
			*now = now.Add(70 * time.Millisecond)
			p.HandleReply(&lisp.MapReply{Probe: true, Nonce: s.req.Nonce}, netip.AddrPortFrom(rtr, 4342))
		}
	}
	if rtt, _ := p.RTT(rtr); rtt != 35*time.Millisecond { // 30 + (70-30)/8
		t.Errorf("smoothed RTT = %v, want 35ms", rtt)
	}
	m := p.Matrix()
	if len(m) != 2 || m[0].Address != rtr.String() || m[0].RTT != 70 || m[0].SRTT != 35 || m[0].Sent != 2 ||
		m[0].Answered != 2 || !m[0].Known || m[1].Address != etr6.String() || m[1].Known || m[1].Misses != 1 {
		t.Errorf("matrix %+v", m)
	}
	if c := p.Counters(); c.Sent != 4 || c.Answered != 2 || c.Unmatched != 2 || c.Missed != 1 {
		t.Errorf("counters %+v", c)
	}
	if len(changes.take()) != 0 {
		t.Error("changes reported while every locator stayed up")
	}
}

// A locator is down after Misses unanswered probes in a row, up at the
// first answer; each change is reported once.
func TestDownAndUp(t *testing.T) {
	var changes changeLog
	targets := []Target{{rtr, eid}}
	p, n, _ := newTestProber(t, &targets, &changes)
	for round := 1; round <= 3; round++ { // probes 1..3 unanswered when rounds 2..4 leave
		p.Round()
		n.take()
		if !p.Up(rtr) {
			t.Fatalf("down after %d rounds", round)
		}
	}
	p.Round()
	n.take()
	if p.Up(rtr) {
		t.Fatal("still up after 3 missed probes")
	}
	if got := changes.take(); len(got) != 1 || got[0] != (change{rtr, false}) {
		t.Errorf("changes %v", got)
	}
	p.Round() // still down: no second report
	out := n.take()
	if len(changes.take()) != 0 {
		t.Error("down reported twice")
	}
	p.HandleReply(&lisp.MapReply{Probe: true, Nonce: out[0].req.Nonce}, netip.AddrPortFrom(rtr, 4342))
	if !p.Up(rtr) {
		t.Error("not up after an answer")
	}
	if got := changes.take(); len(got) != 1 || got[0] != (change{rtr, true}) {
		t.Errorf("changes %v", got)
	}
	// A locator no entry uses any more is forgotten.
	targets = nil
	p.Round()
	if len(p.Matrix()) != 0 || !p.Up(rtr) {
		t.Errorf("forgotten locator: %+v", p.Matrix())
	}
	if c := p.Counters(); c.Downs != 1 || c.Ups != 1 {
		t.Errorf("counters %+v", c)
	}
}

// responder answers RLOC probes on a real UDP socket, as an ETR does, to
// the ITR-RLOC at the probe's source port.
func responder(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			var req lisp.MapRequest
			if req.DecodeFromBytes(buf[:n]) != nil || !req.Probe {
				continue
			}
			itr, _ := control.ReplyAddr(req.ITRRLOCs, from.Addr())
			b, _ := (&lisp.MapReply{Probe: true, Nonce: req.Nonce}).AppendBinary(nil)
			c.WriteToUDPAddrPort(b, netip.AddrPortFrom(itr, from.Port()))
		}
	}()
	return c
}

// Over real UDP on loopback: a locator that stops answering goes down,
// and comes back up when it answers again.
func TestLoopbackResponderStopsAndReturns(t *testing.T) {
	// 127.0.0.2 is an address of lo too, and not one of the prober's.
	resp := responder(t, "127.0.0.2:0")
	port := resp.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	me, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer me.Close()
	var changes changeLog
	loopback := netip.MustParseAddr("127.0.0.1")
	locator := netip.MustParseAddr("127.0.0.2")
	p, err := New(Options{
		Interval: time.Second, Misses: 2, Port: port,
		Sender: control.SenderFunc(func(dst netip.AddrPort, b []byte) error {
			_, err := me.WriteToUDPAddrPort(b, dst)
			return err
		}),
		LocalRLOCs: func() []netip.Addr { return []netip.Addr{loopback} },
		Targets:    func() []Target { return []Target{{locator, eid}} },
		OnChange:   changes.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := me.ReadFromUDPAddrPort(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var reply lisp.MapReply
			if err == nil && reply.DecodeFromBytes(buf[:n]) == nil {
				p.HandleReply(&reply, from)
			}
		}
	}()
	answered := func(want uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); p.Counters().Answered < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("probe %d not answered", want)
			}
		}
	}
	p.Round()
	answered(1)
	if rtt, ok := p.RTT(locator); !ok || rtt <= 0 {
		t.Errorf("RTT %v, %v", rtt, ok)
	}
	resp.Close()
	for range 3 { // the last probe answered, then two missed
		p.Round()
	}
	if p.Up(locator) {
		t.Fatal("up after the responder stopped")
	}
	resp = responder(t, "127.0.0.2:"+strconv.Itoa(int(port)))
	defer resp.Close()
	p.Round()
	answered(2)
	if !p.Up(locator) {
		t.Error("not up after the responder returned")
	}
	if got := changes.take(); len(got) != 2 || got[0].up || !got[1].up {
		t.Errorf("changes %v", got)
	}
}

// SetSchedule (a configuration reload) changes how many probes a
// locator may miss before it is down, from the next round on, and
// refuses a schedule that probes nothing.
func TestSetSchedule(t *testing.T) {
	var changes changeLog
	targets := []Target{{rtr, eid}}
	p, n, _ := newTestProber(t, &targets, &changes)
	if err := p.SetSchedule(500*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
	p.Round()
	n.take()
	p.Round() // the first probe is missed: down at once with 1
	if p.Up(rtr) {
		t.Error("still up after a missed probe with misses 1")
	}
	if err := p.SetSchedule(0, 3); err == nil {
		t.Error("an interval of 0 was taken")
	}
}

// clockedNet is a sender that takes 10 ms per probe, as a busy router
// might: each probe's RTT must still count from its own send.
type clockedNet struct {
	fakeNet
	now *time.Time
}

func (n *clockedNet) Send(dst netip.AddrPort, b []byte) error {
	*n.now = n.now.Add(10 * time.Millisecond)
	return n.fakeNet.Send(dst, b)
}

func TestRTTFromEachSend(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	n := &clockedNet{fakeNet{t: t}, &now}
	var targets []Target
	for i := range 5 {
		targets = append(targets, Target{netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), eid})
	}
	p, err := New(Options{Interval: time.Second, Misses: 3, Sender: n,
		LocalRLOCs: func() []netip.Addr { return []netip.Addr{local4} },
		Targets:    func() []Target { return targets }})
	if err != nil {
		t.Fatal(err)
	}
	p.SetClock(func() time.Time { return now })
	p.Round()
	// Every locator answers 30 ms after its probe left: the probes left
	// at +0, +10, ... +40 ms (stamped before the 10 ms each send takes).
	for i, s := range n.take() {
		at := time.Unix(1_700_000_000, 0).Add(time.Duration(10*i+30) * time.Millisecond)
		now = at
		if !p.HandleReply(&lisp.MapReply{Probe: true, Nonce: s.req.Nonce}, s.dst) {
			t.Fatalf("reply %d not taken", i)
		}
		if rtt, ok := p.RTT(s.dst.Addr()); !ok || rtt != 30*time.Millisecond {
			t.Errorf("probe %d to %s: RTT %v, want 30ms", i, s.dst.Addr(), rtt)
		}
	}
}

// TestMinRTT: the least RTT of the last 30 seconds, which queues on the
// path do not raise, and which forgets a minimum that old.
func TestMinRTT(t *testing.T) {
	targets := []Target{{rtr, eid}}
	var changes changeLog
	p, n, now := newTestProber(t, &targets, &changes)
	answer := func(rtt time.Duration) {
		t.Helper()
		p.Round()
		s := n.take()[0]
		*now = now.Add(rtt)
		p.HandleReply(&lisp.MapReply{Probe: true, Nonce: s.req.Nonce}, s.dst)
		*now = now.Add(5*time.Second - rtt)
	}
	if _, ok := p.MinRTT(rtr); ok {
		t.Fatal("a minimum before any answer")
	}
	for i, c := range []struct{ rtt, min time.Duration }{
		{30 * time.Millisecond, 30 * time.Millisecond},
		{50 * time.Millisecond, 30 * time.Millisecond}, // a queue
		{20 * time.Millisecond, 20 * time.Millisecond},
		{40 * time.Millisecond, 20 * time.Millisecond},
		{45 * time.Millisecond, 20 * time.Millisecond},
	} {
		answer(c.rtt)
		if got, _ := p.MinRTT(rtr); got != c.min {
			t.Fatalf("answer %d: min %v, want %v", i, got, c.min)
		}
	}
	// 30 s after the 20 ms answer, the least of the later ones.
	for range 4 {
		answer(45 * time.Millisecond)
	}
	if got, _ := p.MinRTT(rtr); got != 40*time.Millisecond {
		t.Errorf("after the window: min %v, want 40ms", got)
	}
	if m := p.Matrix()[0]; m.MinRTT != 40 {
		t.Errorf("status %+v", m)
	}
}
