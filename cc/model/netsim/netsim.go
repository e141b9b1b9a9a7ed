// Package netsim is a small packet-level simulator that runs the
// congestion controls' Go model (cc/model) over drop-tail links, so that
// the papers' scenarios can be tried offline, in seconds and with no
// privilege, before the proof tests run them on the lab's emulated links
// (cc/proof_priv_test.go).
//
// It models what decides a control's behaviour on those links and no
// more: links of a rate, a one-way delay and a drop-tail queue in bytes
// (as lab/linkemu has them: the queue counts the frame being serialized),
// a return path of a fixed delay with a little jitter, senders that
// always have data (window-limited, as the proof tests keep them), a
// receiver that acknowledges every second segment (at once when out of
// order), SACK loss detection by three later segments or by time as
// RACK does, a tail-loss probe, fast recovery that brings the window to
// the control's threshold, and retransmission timeouts. An MPTCP
// connection is its subflows, each a sender on its own path, coupled
// through a model.Conn; the scheduler, the connection-level window and
// head-of-line blocking are not modelled.
package netsim

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/amptcp/amptcp/cc/model"
)

// Frame sizes: 1448 bytes of payload (TCP timestamps on) in 1514-byte
// Ethernet frames, and a 66-byte ACK.
const (
	MSS       = 1448
	frameSize = 1514
	ackSize   = 66
)

// Sim is a discrete-event simulation; time is in nanoseconds.
type Sim struct {
	now    int64
	events eventHeap
	n      uint64
	rng    *rand.Rand
}

type event struct {
	at int64
	n  uint64
	fn func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].n < h[j].n
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// New returns a simulation whose jitter comes from seed.
func New(seed uint64) *Sim { return &Sim{rng: rand.New(rand.NewPCG(seed, 0x5eed))} }

// Now is the simulated time.
func (s *Sim) Now() time.Duration { return time.Duration(s.now) }

func (s *Sim) at(t int64, fn func()) {
	s.n++
	heap.Push(&s.events, event{at: max(t, s.now), n: s.n, fn: fn})
}

// At runs fn at simulated time t.
func (s *Sim) At(t time.Duration, fn func()) { s.at(int64(t), fn) }

// Run runs the simulation until t.
func (s *Sim) Run(t time.Duration) {
	for len(s.events) > 0 && s.events[0].at <= int64(t) {
		e := heap.Pop(&s.events).(event)
		s.now = e.at
		e.fn()
	}
	s.now = int64(t)
}

// Link is one direction of an emulated link: a serializer of Rate bit/s
// behind a drop-tail queue of QueueBytes, then Delay.
type Link struct {
	sim        *Sim
	Rate       float64
	Delay      time.Duration
	QueueBytes int
	bytes      int
	free       int64
	Drops      int
}

// NewLink returns a link of rate (bit/s), one-way delay and a queue of
// queueBDP times its bandwidth-delay product (RTT twice the delay), at
// least three frames: the rig's bottleneck().
func (s *Sim) NewLink(rate float64, delay time.Duration, queueBDP float64) *Link {
	bdp := rate / 8 * (2 * delay).Seconds()
	return &Link{sim: s, Rate: rate, Delay: delay, QueueBytes: max(int(queueBDP*bdp), 3*frameSize)}
}

// send offers a frame of n bytes; deliver runs when it arrives. False:
// the queue was full and the frame is lost.
func (l *Link) send(n int, deliver func()) bool {
	s := l.sim
	if l.bytes+n > l.QueueBytes {
		l.Drops++
		return false
	}
	l.bytes += n
	done := max(s.now, l.free) + int64(float64(n)*8e9/l.Rate)
	l.free = done
	s.at(done, func() { l.bytes -= n })
	s.at(done+int64(l.Delay), deliver)
	return true
}

// pkt is the sender's record of one segment.
type pkt struct {
	sent   int64 // when last (re)transmitted
	acked  bool
	lost   bool // marked lost, not retransmitted since
	retx   bool
	flight bool
}

// Flow is one TCP connection or MPTCP subflow: a sender that always has
// data, over fwd, and its receiver, whose ACKs come back after the link's
// delay.
type Flow struct {
	sim  *Sim
	Sock *model.Sock
	fwd  *Link

	// sender
	pkts     []pkt
	nxt, una uint32
	inflight int
	state    uint8
	recover  uint32
	srtt     int64 // ns; 0: no sample yet
	rttvar   int64
	minRTT   int64
	rackSent int64 // the latest send time of a segment acknowledged
	hiSacked int64 // the highest segment acknowledged, -1: none
	rtoGen   int   // bumps to cancel the armed timers
	backoff  uint
	started  bool
	stopped  bool

	// receiver
	rcvNxt   uint32
	ooo      map[uint32]bool
	pending  int
	delack   bool
	ackFree  int64 // ACKs arrive in order
	ackGen   int
	Acked    uint64 // segments the sender saw acknowledged
	Received uint64 // segments delivered in order to the receiver

	// AckEvery is how many in-order segments the receiver takes before
	// it acknowledges them (0 or 2: every second, as Linux does; more
	// makes the sender burstier).
	AckEvery int
}

// NewFlow starts a flow over fwd whose control is sock (a plain
// model.Sock or a subflow of a model.Conn), at start.
func (s *Sim) NewFlow(sock *model.Sock, fwd *Link, start time.Duration) *Flow {
	f := &Flow{sim: s, Sock: sock, fwd: fwd, hiSacked: -1, ooo: map[uint32]bool{}, minRTT: -1}
	s.At(start, func() {
		f.started = true
		f.Sock.CwndEvent(model.EventTxStart)
		f.send()
	})
	return f
}

// InitTCP is a socket's state at the start: Linux's initial window.
func InitTCP() model.TCP {
	return model.TCP{Cwnd: 10, Ssthresh: 0x7fffffff, Clamp: 0xffffffff, CwndLimited: true}
}

func (f *Flow) rto() int64 {
	if f.srtt == 0 {
		return int64(time.Second) << f.backoff
	}
	return (f.srtt + max(4*f.rttvar, int64(200*time.Millisecond))) << f.backoff
}

// Stop ends the flow now, as a user who leaves: it sends nothing more
// and its timers lapse; what is in flight still arrives.
func (f *Flow) Stop() {
	f.stopped = true
	f.rtoGen++
}

// send transmits what the window allows: lost segments first.
func (f *Flow) send() {
	for !f.stopped && f.inflight < int(f.Sock.Cwnd) {
		q, ok := f.firstLost()
		if !ok {
			q = f.nxt
			f.nxt++
			f.pkts = append(f.pkts, pkt{})
		}
		f.xmit(q)
	}
}

func (f *Flow) firstLost() (uint32, bool) {
	for q := f.una; q < f.nxt; q++ {
		if p := &f.pkts[q]; p.lost && !p.acked {
			return q, true
		}
	}
	return 0, false
}

func (f *Flow) xmit(q uint32) {
	if f.stopped {
		return
	}
	p := &f.pkts[q]
	if p.lost || p.sent != 0 {
		p.retx = true
	}
	p.lost = false
	p.sent = f.sim.now
	if !p.flight {
		p.flight = true
		f.inflight++
	}
	f.Sock.SndNxt = f.nxt * MSS
	f.fwd.send(frameSize, func() { f.receive(q) })
	f.arm()
}

// arm (re)starts the retransmission timer and the tail-loss probe from
// now.
func (f *Flow) arm() {
	if f.stopped {
		return
	}
	f.rtoGen++
	gen := f.rtoGen
	f.sim.at(f.sim.now+f.rto(), func() {
		if gen == f.rtoGen && f.inflight > 0 {
			f.timeout()
		}
	})
	if f.srtt > 0 && f.state == model.StateOpen {
		pto := max(2*f.srtt, int64(10*time.Millisecond))
		f.sim.at(f.sim.now+pto, func() {
			if gen == f.rtoGen && f.inflight > 0 && f.state == model.StateOpen {
				f.probe()
			}
		})
	}
}

// probe is the tail-loss probe: the highest segment in flight again, so
// that its ACK shows what was lost.
func (f *Flow) probe() {
	for q := f.nxt; q > f.una; q-- {
		if p := &f.pkts[q-1]; !p.acked {
			p.retx = true
			p.sent = f.sim.now
			qq := q - 1
			f.fwd.send(frameSize, func() { f.receive(qq) })
			break
		}
	}
	f.rtoGen++
	gen := f.rtoGen
	f.sim.at(f.sim.now+f.rto(), func() {
		if gen == f.rtoGen && f.inflight > 0 {
			f.timeout()
		}
	})
}

func (f *Flow) timeout() {
	if f.state == model.StateOpen || f.state == model.StateRecovery && f.una >= f.recover {
		f.Sock.PriorCwnd = f.Sock.Cwnd
		f.Sock.Ssthresh = f.Sock.LossSsthresh()
	}
	f.Sock.CwndCnt = 0
	f.Sock.Cwnd = 1
	for q := f.una; q < f.nxt; q++ {
		if p := &f.pkts[q]; !p.acked {
			if p.flight {
				p.flight = false
				f.inflight--
			}
			p.lost = true
		}
	}
	f.state = model.StateLoss
	f.recover = f.nxt
	f.Sock.SetState(model.StateLoss)
	f.backoff = min(f.backoff+1, 6)
	f.send()
}

// receive is the receiver's side: a segment arrives.
func (f *Flow) receive(q uint32) {
	inOrder := q == f.rcvNxt && len(f.ooo) == 0
	switch {
	case q < f.rcvNxt:
	case q == f.rcvNxt:
		f.rcvNxt++
		f.Received++
		for f.ooo[f.rcvNxt] {
			delete(f.ooo, f.rcvNxt)
			f.rcvNxt++
			f.Received++
		}
	default:
		f.ooo[q] = true
	}
	if !inOrder {
		f.ack(q)
		return
	}
	f.pending++
	if f.pending >= max(f.AckEvery, 2) {
		f.ack(q)
		return
	}
	if !f.delack {
		f.delack = true
		gen := f.ackGen
		f.sim.at(f.sim.now+int64(40*time.Millisecond), func() {
			if gen == f.ackGen && f.delack {
				f.ack(q)
			}
		})
	}
}

// ack sends an ACK of everything up to rcvNxt and of segment q (SACK).
func (f *Flow) ack(q uint32) {
	f.pending = 0
	f.delack = false
	f.ackGen++
	cum := f.rcvNxt
	d := int64(f.fwd.Delay) + int64(float64(ackSize)*8e9/f.fwd.Rate) + f.sim.rng.Int64N(int64(200*time.Microsecond))
	f.ackFree = max(f.sim.now+d, f.ackFree)
	f.sim.at(f.ackFree, func() { f.onAck(cum, q) })
}

func (f *Flow) markAcked(q uint32) bool {
	p := &f.pkts[q]
	if p.acked {
		return false
	}
	p.acked = true
	p.lost = false
	if p.flight {
		p.flight = false
		f.inflight--
	}
	f.rackSent = max(f.rackSent, p.sent)
	return true
}

// onAck is the sender's side of an ACK.
func (f *Flow) onAck(cum, q uint32) {
	s := f.Sock
	var acked uint32
	for x := f.una; x < cum; x++ {
		if f.markAcked(x) {
			acked++
		}
	}
	if q >= cum && q < f.nxt && f.markAcked(q) {
		acked++
	}
	progress := cum > f.una
	f.una = max(f.una, cum)
	f.hiSacked = max(f.hiSacked, int64(q))
	sample := int32(-1)
	if acked > 0 && !f.pkts[q].retx {
		r := f.sim.now - f.pkts[q].sent
		sample = int32(r / 1000)
		if f.srtt == 0 {
			f.srtt, f.rttvar = r, r/2
		} else {
			d := r - f.srtt
			if d < 0 {
				d = -d
			}
			f.rttvar += (d - f.rttvar) / 4
			f.srtt += (r - f.srtt) / 8
		}
		if f.minRTT < 0 || r < f.minRTT {
			f.minRTT = r
		}
	}
	if acked == 0 && !progress {
		f.detect()
		f.send()
		return
	}
	f.Acked += uint64(acked)
	f.backoff = 0
	s.BytesAcked += uint64(acked) * MSS
	s.SRTT = uint32(f.srtt / 1000)
	s.SndNxt = f.nxt * MSS
	s.CwndLimited = true
	s.PktsAcked(sample)
	f.detect()
	switch f.state {
	case model.StateRecovery:
		if f.una >= f.recover {
			s.Cwnd = s.Ssthresh
			f.state = model.StateOpen
			s.SetState(model.StateOpen)
			s.CongAvoid(f.una*MSS, acked)
		}
	case model.StateLoss:
		s.CongAvoid(f.una*MSS, acked)
		if f.una >= f.recover {
			f.state = model.StateOpen
			s.SetState(model.StateOpen)
		}
	default:
		s.CongAvoid(f.una*MSS, acked)
	}
	if f.inflight > 0 {
		f.arm()
	}
	f.send()
}

// detect marks lost the segments that three later ones overtook, or
// (RACK) that a segment sent after them overtook by a quarter of the
// least RTT; the first loss starts fast recovery.
func (f *Flow) detect() {
	reo := max(f.minRTT/4, 0)
	found := false
	var next int64 = -1
	for x := f.una; x < f.nxt && int64(x) < f.hiSacked; x++ {
		p := &f.pkts[x]
		if p.acked || p.lost || !p.flight || p.sent >= f.rackSent {
			continue
		}
		if int64(x)+3 <= f.hiSacked && !p.retx || f.sim.now >= p.sent+f.srtt+reo {
			p.lost = true
			p.flight = false
			f.inflight--
			found = true
		} else if t := p.sent + f.srtt + reo; next < 0 || t < next {
			next = t
		}
	}
	if next >= 0 {
		f.sim.at(next, func() {
			f.detect()
			f.send()
		})
	}
	if !found || f.state != model.StateOpen {
		return
	}
	s := f.Sock
	s.PriorCwnd = s.Cwnd
	ss := s.LossSsthresh()
	s.Ssthresh = ss
	s.CwndCnt = 0
	s.Cwnd = ss
	f.state = model.StateRecovery
	f.recover = f.nxt
	s.SetState(model.StateRecovery)
	// Fast retransmit: the first lost segment goes at once.
	if q, ok := f.firstLost(); ok && f.inflight >= int(s.Cwnd) {
		f.xmit(q)
	}
}

// Meter measures flows' rates between two instants.
type Meter struct {
	flows  []*Flow
	r0, a0 []uint64
	t0     int64
}

// Start starts measuring the flows now.
func (s *Sim) Start(flows ...*Flow) *Meter {
	m := &Meter{flows: flows, t0: s.now}
	for _, f := range flows {
		m.r0 = append(m.r0, f.Received)
		m.a0 = append(m.a0, f.Acked)
	}
	return m
}

// Goodput is flow i's rate in Mbit/s since Start, by what its receiver
// got in order.
func (m *Meter) Goodput(s *Sim, i int) float64 {
	return float64(m.flows[i].Received-m.r0[i]) * MSS * 8 / (float64(s.now-m.t0) / 1e9) / 1e6
}

// AckedRate is flow i's rate in Mbit/s since Start, by what its sender
// saw acknowledged (a subflow's share of an MPTCP connection).
func (m *Meter) AckedRate(s *Sim, i int) float64 {
	return float64(m.flows[i].Acked-m.a0[i]) * MSS * 8 / (float64(s.now-m.t0) / 1e9) / 1e6
}
