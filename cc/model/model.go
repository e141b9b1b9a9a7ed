// Package model is the reference model of amptcp's congestion controls:
// the equations of RFC 6356 (LIA), [Khalili12] (OLIA), [Peng16] (BALIA)
// and [Cao12] (wVegas) in float64, applied to the same integer windows
// that the kernel keeps. The BPF programs compute the same in fixed
// point (cc/bpf/ccmath.h); the differential test drives both with the
// same ACKs, losses and RTTs and compares the windows.
//
// The model follows the kernel's structure where the papers leave it
// open: windows in packets, increases counted per acknowledged packet,
// Reno's slow start and its fractional counter, and what one subflow
// sees of the others is what they published at their last callback.
package model

import "math"

// Algo is a congestion control.
type Algo int

// The congestion controls, numbered as enum amp_algo.
const (
	Reno Algo = iota
	LIA
	OLIA
	BALIA
	WVegas
)

func (a Algo) String() string {
	return [...]string{"reno", "lia", "olia", "balia", "wvegas"}[a]
}

// TCP states (TCP_CA_*) and congestion events (CA_EVENT_*).
const (
	StateOpen     = 0
	StateCWR      = 2
	StateRecovery = 3
	StateLoss     = 4

	EventTxStart     = 0
	EventCwndRestart = 1
)

// The Vegas family's constants: tcp_vegas.c's alpha, beta, gamma in
// packets, and [Cao12]'s total queue of a connection and least share.
const (
	vegasAlpha     = 2
	vegasBeta      = 4
	vegasGamma     = 1
	wvegasTotal    = 10
	wvegasMinAlpha = 2
)

// minCwnd is the least window OLIA's decrease leaves.
const minCwnd = 2

// TCP is what a congestion control reads and writes of a socket.
type TCP struct {
	Cwnd, CwndCnt, Ssthresh, Clamp uint32
	SRTT                           uint32 // µs
	SndNxt                         uint32
	PriorCwnd                      uint32
	CwndLimited                    bool
	BytesAcked                     uint64
}

// Sock is one socket: a plain TCP socket, or a subflow of Conn.
type Sock struct {
	TCP
	conn    *Conn
	state   uint8
	credit  float64 // window increase owed, in packets of cwnd
	lossPrv uint64
	lossMrk uint64
	pub     published // what the others see of it
	left    bool
	// algoPlain is the control of a socket with no connection.
	algoPlain Algo

	// (w)Vegas
	vegasOn   bool
	begSndNxt uint32
	cntRTT    uint32
	sumRTT    float64
	minRTT    uint32
	baseRTT   uint32
	alpha     float64 // wVegas queue target, packets
	queue     float64 // least queueing delay since the last drain, µs
	rate      float64 // published cwnd/RTT
	hasRate   bool
}

// published is a subflow's slot in the connection.
type published struct {
	cwnd     uint32
	rtt      uint32
	acked    uint64
	lossPrev uint64
	lossMark uint64
	alpha    float64
}

// Conn is one MPTCP connection of coupled subflows.
type Conn struct {
	Algo  Algo
	Subs  []*Sock
	Alpha float64 // LIA's alpha, after the last increase
}

// NewConn returns a connection with no subflow.
func NewConn(a Algo) *Conn { return &Conn{Algo: a} }

// Join adds a subflow with the socket's initial state and runs init.
func (c *Conn) Join(t TCP) *Sock {
	s := &Sock{TCP: t, conn: c}
	c.Subs = append(c.Subs, s)
	s.init(c.Algo)
	return s
}

// NewPlain returns a plain TCP socket under a (no connection).
func NewPlain(a Algo, t TCP) *Sock {
	s := &Sock{TCP: t}
	s.init(a)
	s.algoPlain = a
	return s
}

func (s *Sock) algo() Algo {
	if s.conn == nil {
		return s.algoPlain
	}
	return s.conn.Algo
}

// Leave removes the subflow from its connection (release).
func (s *Sock) Leave() { s.left = true }

// Alpha is the coupling term published for the subflow (OLIA's alpha_r,
// BALIA's a_r, wVegas's queue target).
func (s *Sock) Alpha() float64 { return s.pub.alpha }

func (s *Sock) init(a Algo) {
	s.credit = 0
	s.lossPrv = 0
	s.lossMrk = s.BytesAcked
	s.state = StateOpen
	if a == WVegas {
		s.vegasInit()
	}
}

// --- Reno (net/ipv4/tcp_cong.c) ---

func (s *Sock) slowStart(acked uint32) uint32 {
	cwnd := min(s.Cwnd+acked, s.Ssthresh)
	acked -= cwnd - s.Cwnd
	s.Cwnd = min(cwnd, s.Clamp)
	return acked
}

func (s *Sock) ai(w, acked uint32) {
	if s.CwndCnt >= w {
		s.CwndCnt = 0
		s.Cwnd++
	}
	s.CwndCnt += acked
	if s.CwndCnt >= w {
		d := s.CwndCnt / w
		s.CwndCnt -= d * w
		s.Cwnd += d
	}
	s.Cwnd = min(s.Cwnd, s.Clamp)
}

func (s *Sock) renoCongAvoid(acked uint32) {
	if !s.CwndLimited {
		return
	}
	if s.Cwnd < s.Ssthresh {
		if acked = s.slowStart(acked); acked == 0 {
			return
		}
	}
	s.ai(max(s.Cwnd, 1), acked)
}

func renoSsthresh(t *TCP) uint32 { return max(t.Cwnd>>1, 2) }

// Undo is the window after a spurious loss is undone (Reno's).
func (s *Sock) Undo() uint32 { return max(s.Cwnd, s.PriorCwnd) }

// creditAdd grows (or shrinks) the window by acked*c/cwnd packets.
func (s *Sock) creditAdd(c float64, acked uint32) {
	acked = min(acked, 0xffff)
	cwnd := max(s.Cwnd, 1)
	s.credit += c * float64(acked)
	if s.credit >= float64(cwnd) {
		k := math.Floor(s.credit / float64(cwnd))
		s.credit -= k * float64(cwnd)
		cwnd += uint32(k)
	} else if s.credit <= -float64(cwnd) {
		// OLIA's decrease, down to the two packets Linux keeps.
		k := math.Floor(-s.credit / float64(cwnd))
		s.credit += k * float64(cwnd)
		if float64(cwnd) > k+minCwnd {
			cwnd -= uint32(k)
		} else {
			cwnd = minCwnd
		}
	}
	s.Cwnd = min(max(cwnd, 1), s.Clamp)
}

// --- what the subflows see of each other ---

func (s *Sock) publish() {
	if s.conn == nil {
		return
	}
	s.pub.cwnd = s.Cwnd
	if s.state == StateRecovery || s.state == StateCWR {
		s.pub.cwnd = s.Ssthresh
	}
	s.pub.rtt = s.SRTT
	s.pub.acked = s.BytesAcked
	s.pub.lossPrev = s.lossPrv
	s.pub.lossMark = s.lossMrk
}

// peer is a subflow that the coupling counts: one with an RTT sample.
type peer struct {
	s      *Sock
	w, rtt float64
}

// The bounds of the fixed-point code (amp.h), which the model applies
// too: they never bind on a real path.
const (
	wMax   = 1 << 20
	rttMax = 1 << 24
)

func (c *Conn) peers() []peer {
	var out []peer
	for _, s := range c.Subs {
		if s.left || s.pub.rtt == 0 {
			continue
		}
		out = append(out, peer{s, math.Min(math.Max(float64(s.pub.cwnd), 1), wMax), math.Min(float64(s.pub.rtt), rttMax)})
	}
	return out
}

// liaCredit: RFC 6356 §3, per ACK min(alpha/w_total, 1/w_r) with
// alpha = w_total * max_k(w_k/rtt_k^2) / (sum_k w_k/rtt_k)^2.
func (c *Conn) liaCredit(me *Sock, ps []peer) float64 {
	var wtot, best, sum float64
	var mine *peer
	for i := range ps {
		p := &ps[i]
		wtot += p.w
		best = math.Max(best, p.w/(p.rtt*p.rtt))
		sum += p.w / p.rtt
		if p.s == me {
			mine = p
		}
	}
	c.Alpha = wtot * best / (sum * sum)
	if mine == nil {
		return 1
	}
	return math.Min(c.Alpha/wtot*mine.w, 1)
}

// oliaCredit: [Khalili12] §IV, per ACK on path r
// (w_r/rtt_r^2) / (sum_p w_p/rtt_p)^2 + alpha_r/w_r.
func (c *Conn) oliaCredit(me *Sock, ps []peer) float64 {
	var mine *peer
	var sum, wmax, best float64
	metric := make([]float64, len(ps))
	for i := range ps {
		p := &ps[i]
		sum += p.w / p.rtt
		wmax = math.Max(wmax, p.w)
		l := p.s.pub.acked - p.s.pub.lossMark
		l = max(l, p.s.pub.lossPrev)
		metric[i] = float64(l) / (p.rtt * p.rtt) // the best paths: largest l/rtt^2
		best = math.Max(best, metric[i])
		if p.s == me {
			mine = p
		}
	}
	if mine == nil {
		return 1
	}
	var inM, bNotM int
	var meInM, meInB bool
	for i := range ps {
		switch {
		case ps[i].w == wmax:
			inM++
			meInM = meInM || ps[i].s == me
		case metric[i] == best:
			bNotM++
			meInB = meInB || ps[i].s == me
		}
	}
	n := float64(len(ps))
	alpha := 0.0
	switch {
	case bNotM == 0:
	case meInM:
		alpha = -1 / (n * float64(inM))
	case meInB:
		alpha = 1 / (n * float64(bNotM))
	}
	me.pub.alpha = alpha
	x := mine.w / (mine.rtt * mine.rtt) / (sum * sum)
	return x*mine.w + alpha
}

// baliaTerms returns x_r/(rtt_r (sum x)^2) * w_r and a_r = max x / x_r.
func baliaTerms(me *Sock, ps []peer) (inc, a float64, ok bool) {
	var mine *peer
	var sum, xmax float64
	for i := range ps {
		x := ps[i].w / ps[i].rtt
		sum += x
		xmax = math.Max(xmax, x)
		if ps[i].s == me {
			mine = &ps[i]
		}
	}
	if mine == nil {
		return 0, 0, false
	}
	x := mine.w / mine.rtt
	return x / (mine.rtt * sum * sum) * mine.w, xmax / x, true
}

// baliaCredit: [Peng16], per ACK x_r/(rtt_r (sum x)^2) (1+a_r)/2 (4+a_r)/5.
func (c *Conn) baliaCredit(me *Sock, ps []peer) float64 {
	inc, a, ok := baliaTerms(me, ps)
	if !ok {
		return 1
	}
	me.pub.alpha = a
	return inc * (1 + a) / 2 * (4 + a) / 5
}

// baliaSsthresh: w_r - w_r/2 * min(a_r, 1.5).
func (c *Conn) baliaSsthresh(me *Sock) uint32 {
	a := 1.0
	if c != nil {
		if _, ar, ok := baliaTerms(me, c.peers()); ok {
			a = math.Min(ar, 1.5)
		} else {
			a = 1.5
		}
	}
	md := uint32(math.Floor(float64(me.Cwnd) / 2 * a))
	if me.Cwnd > md+2 {
		return me.Cwnd - md
	}
	return 2
}

func (s *Sock) coupledCongAvoid(acked uint32) {
	s.publish()
	if !s.CwndLimited {
		return
	}
	if s.Cwnd < s.Ssthresh {
		acked = s.slowStart(acked)
		s.publish()
		if acked == 0 {
			return
		}
	}
	credit := 1.0
	if c := s.conn; c != nil {
		if ps := c.peers(); len(ps) > 0 {
			switch c.Algo {
			case LIA:
				credit = c.liaCredit(s, ps)
			case OLIA:
				credit = c.oliaCredit(s, ps)
			case BALIA:
				credit = c.baliaCredit(s, ps)
			}
		}
	}
	s.creditAdd(credit, acked)
	s.publish()
}

// --- the callbacks ---

// CongAvoid is cong_avoid: ack is the acknowledged sequence number,
// acked the packets it acknowledged.
func (s *Sock) CongAvoid(ack, acked uint32) {
	switch a := s.algo(); {
	case a == WVegas && s.conn != nil:
		s.wvegasCongAvoid(ack, acked)
	case a == WVegas:
		s.vegasCongAvoid(ack, acked)
	case a == Reno:
		s.renoCongAvoid(acked)
	default:
		s.coupledCongAvoid(acked)
	}
}

// LossSsthresh is ssthresh: the slow-start threshold after a loss, which
// the window is brought down to.
func (s *Sock) LossSsthresh() uint32 {
	a := s.algo()
	if a == Reno || a == WVegas {
		s.publish()
		ss := renoSsthresh(&s.TCP)
		s.pub.cwnd = ss
		return ss
	}
	if s.BytesAcked != s.lossMrk {
		s.lossPrv = s.BytesAcked - s.lossMrk
		s.lossMrk = s.BytesAcked
	}
	s.credit = 0
	var ss uint32
	if a == BALIA {
		ss = s.conn.baliaSsthresh(s)
	} else {
		ss = renoSsthresh(&s.TCP)
	}
	s.publish()
	s.pub.cwnd = ss
	return ss
}

// SetState is set_state.
func (s *Sock) SetState(state uint8) {
	s.state = state
	if s.algo() == WVegas {
		if state == StateOpen {
			s.vegasEnable()
		} else {
			s.vegasOn = false
		}
	}
	if state == StateLoss && s.conn != nil {
		s.publish()
		s.pub.cwnd = 1
	}
}

// PktsAcked is pkts_acked with an RTT sample (negative: none).
func (s *Sock) PktsAcked(rtt int32) {
	if s.algo() != WVegas || rtt < 0 {
		return
	}
	v := uint32(rtt) + 1
	s.baseRTT = min(s.baseRTT, v)
	s.minRTT = min(s.minRTT, v)
	s.sumRTT += float64(v)
	s.cntRTT++
}

// CwndEvent is cwnd_event.
func (s *Sock) CwndEvent(ev uint8) {
	if s.algo() == WVegas && (ev == EventCwndRestart || ev == EventTxStart) {
		s.vegasInit()
	}
}
