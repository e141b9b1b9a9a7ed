package model

// The kernel's window code that the controls run themselves, because they
// implement cong_control (docs/cc.md): transcribed from
// net/ipv4/tcp_input.c and tcp_output.c as the reference their C is
// checked against.

// PRRCwnd is the window the kernel's proportional rate reduction
// (tcp_cwnd_reduction in net/ipv4/tcp_input.c, RFC 6937) sets after an
// ACK in CWR or Recovery that delivered newly packets: prior is the
// window when the reduction began, delivered the packets delivered since
// (this ACK's included), out the packets sent since. The controls run it
// themselves (cong_control); this is the reference their C is checked
// against, in the kernel's int arithmetic.
func PRRCwnd(ssthresh, inFlight, prior, delivered, out, newly uint32, newlyLost, unaAdvanced bool) uint32 {
	delta := int32(ssthresh - inFlight)
	var sndcnt int32
	if delta < 0 {
		dividend := uint64(ssthresh)*uint64(delivered) + uint64(prior) - 1
		sndcnt = int32(dividend/uint64(prior)) - int32(out)
	} else {
		sndcnt = max(int32(delivered-out), int32(newly))
		if unaAdvanced && !newlyLost {
			sndcnt++
		}
		sndcnt = min(delta, sndcnt)
	}
	floor := int32(1)
	if out > 0 {
		floor = 0
	}
	return inFlight + uint32(max(sndcnt, floor))
}

// PacingRate is the kernel's pacing rate after an ACK
// (tcp_update_pacing_rate), bytes per second: mss × window / srtt, 200 % of
// it while the window is below half the threshold, 120 % after (the
// defaults of net.ipv4.tcp_pacing_ss_ratio and _ca_ratio), the window at
// least the packets out, srtt in 1/8 µs as the socket keeps it, at most
// maxRate.
func PacingRate(mss, cwnd, ssthresh, packetsOut, srttUs8 uint32, maxRate uint64) uint64 {
	rate := uint64(mss) * ((1_000_000 / 100) << 3)
	if cwnd < ssthresh/2 {
		rate *= 200
	} else {
		rate *= 120
	}
	if packetsOut > cwnd {
		rate *= uint64(packetsOut)
	} else {
		rate *= uint64(cwnd)
	}
	if srttUs8 != 0 {
		rate /= uint64(srttUs8)
	}
	return min(rate, maxRate)
}

// RestartCwnd is the window after an idle period of idle jiffies
// (tcp_cwnd_restart): halved for each whole RTO of it, down to
// the initial window or the window if smaller.
func RestartCwnd(cwnd, init uint32, idle int32, rto uint32) uint32 {
	restart := min(init, cwnd)
	for {
		idle -= int32(rto)
		if idle <= 0 || cwnd <= restart {
			break
		}
		cwnd >>= 1
	}
	return max(cwnd, restart)
}
