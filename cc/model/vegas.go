package model

import "math"

func (s *Sock) vegasEnable() {
	s.vegasOn = true
	s.begSndNxt = s.SndNxt
	s.cntRTT = 0
	s.sumRTT = 0
	s.minRTT = 0x7fffffff
}

func (s *Sock) vegasInit() {
	s.baseRTT = 0x7fffffff
	s.alpha = wvegasMinAlpha
	s.queue = 0
	s.vegasEnable()
}

func after(a, b uint32) bool { return int32(b-a) < 0 }

func (s *Sock) currentSsthresh() uint32 { return max(s.Ssthresh, s.Cwnd>>1+s.Cwnd>>2) }

func (s *Sock) vegasBound() {
	if s.Cwnd < 2 {
		s.Cwnd = 2
	} else if s.Cwnd > s.Clamp {
		s.Cwnd = s.Clamp
	}
	s.Ssthresh = s.currentSsthresh()
}

func (s *Sock) endRound() {
	s.cntRTT = 0
	s.sumRTT = 0
	s.minRTT = 0x7fffffff
}

// vegasCongAvoid is Linux's tcp_vegas.c, the base of amp_wvegas on a
// plain TCP socket: once per RTT, a queue of diff packets kept between
// alpha and beta. It is integer arithmetic in the kernel too.
func (s *Sock) vegasCongAvoid(ack, acked uint32) {
	if !s.vegasOn {
		s.renoCongAvoid(acked)
		return
	}
	if !after(ack, s.begSndNxt) {
		if s.Cwnd < s.Ssthresh {
			s.slowStart(acked)
		}
		return
	}
	s.begSndNxt = s.SndNxt
	if s.cntRTT <= 2 {
		s.renoCongAvoid(acked)
	} else {
		rtt, base := s.minRTT, max(s.baseRTT, 1)
		target := uint64(s.Cwnd) * uint64(base) / uint64(rtt)
		diff := uint64(s.Cwnd) * uint64(rtt-base) / uint64(base)
		switch {
		case diff > vegasGamma && s.Cwnd < s.Ssthresh:
			s.Cwnd = min(s.Cwnd, uint32(target)+1)
			s.Ssthresh = min(s.Ssthresh, s.Cwnd-1)
		case s.Cwnd < s.Ssthresh:
			s.slowStart(acked)
		case diff > vegasBeta:
			s.Cwnd--
			s.Ssthresh = min(s.Ssthresh, s.Cwnd-1)
		case diff < vegasAlpha:
			s.Cwnd++
		}
		s.vegasBound()
	}
	s.endRound()
}

// wvegasCongAvoid: [Cao12] §III, once per RTT on subflow r with the
// round's average RTT: diff_r = w_r (rtt_r - base_r)/rtt_r packets are
// queued; the window moves by one toward alpha_r = max(2, total *
// x_r / sum x), and halves below base/rtt when the queueing delay has
// doubled since its least value with more than alpha_r queued.
func (s *Sock) wvegasCongAvoid(ack, acked uint32) {
	s.publish()
	switch {
	case !s.vegasOn:
		s.renoCongAvoid(acked)
	case after(ack, s.begSndNxt):
		s.begSndNxt = s.SndNxt
		if s.cntRTT <= 2 {
			s.renoCongAvoid(acked)
		} else {
			s.wvegasRound(acked)
		}
		s.endRound()
	case s.Cwnd < s.Ssthresh:
		s.slowStart(acked)
	}
	s.publish()
}

func (s *Sock) wvegasRound(acked uint32) {
	// The round's RTT in whole µs, as the kernel measures them.
	rtt := math.Min(math.Max(math.Floor(s.sumRTT/float64(s.cntRTT)), 1), rttMax)
	base := math.Min(math.Max(float64(s.baseRTT), 1), rttMax)
	w := math.Min(math.Max(float64(s.Cwnd), 1), wMax)
	q := math.Max(rtt-base, 0)
	diff := w * q / rtt
	switch {
	case diff > vegasGamma && s.Cwnd < s.Ssthresh:
		s.Cwnd = min(s.Cwnd, uint32(float64(s.Cwnd)*base/rtt)+1)
		s.Ssthresh = min(s.Ssthresh, s.Cwnd-1)
	case s.Cwnd < s.Ssthresh:
		s.slowStart(acked)
	default:
		if diff >= s.alpha {
			s.rate, s.hasRate = w/rtt, true
			s.alpha = math.Max(wvegasMinAlpha, s.weight()*wvegasTotal)
		}
		if diff > s.alpha {
			s.Cwnd--
			s.Ssthresh = min(s.Ssthresh, s.Cwnd-1)
		} else if diff < s.alpha {
			s.Cwnd++
		}
		if s.queue == 0 || s.queue > q {
			s.queue = q
		}
		if q >= 2*s.queue && diff > s.alpha {
			s.Cwnd = uint32(float64(s.Cwnd) * base / (2 * rtt))
			s.queue = 0
		}
	}
	s.vegasBound()
	if !s.hasRate {
		s.rate, s.hasRate = math.Min(math.Max(float64(s.Cwnd), 1), wMax)/rtt, true
	}
	s.pub.alpha = s.alpha
}

// weight is x_r / sum x over the subflows' published rates.
func (s *Sock) weight() float64 {
	var total float64
	for _, o := range s.conn.Subs {
		if !o.left && o.hasRate {
			total += o.rate
		}
	}
	if total == 0 || !s.hasRate || s.rate == 0 {
		return 1
	}
	return s.rate / total
}
