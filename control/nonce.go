package control

import "time"

// Map-Register nonces that only increase: RFC 9301 §5.6 leaves the nonce
// of a Map-Register free "as part of an anti-replay solution", and lispd's
// is the time the Map-Register was sent, in 32.32 fixed point: Unix
// seconds in the high 32 bits (a hex dump shows the date), the fraction of
// the second in the low 32. A map-server that keeps the last nonce it
// accepted from an xTR refuses anything not newer, and one whose time is
// far from its own clock. Times from 1970 to 2106 fit.

// TimeNonces makes the nonces of one xTR's Map-Registers: the time of
// sending, or one more than the last when the clock did not move past it
// (two in the same instant, or a clock stepped back), so that they only
// increase, across restarts too while the clock does. It is not safe for
// concurrent use: the xtr calls it under its lock.
type TimeNonces struct {
	last uint64
}

// Next returns the nonce of a Map-Register sent at now.
func (n *TimeNonces) Next(now time.Time) uint64 {
	v := TimeNonce(now)
	if v <= n.last {
		v = n.last + 1
	}
	n.last = v
	return v
}

// TimeNonce is the nonce of time t.
func TimeNonce(t time.Time) uint64 {
	frac := uint64(t.Nanosecond()) << 32 / uint64(time.Second)
	return uint64(t.Unix())<<32 | frac
}

// NonceTime is the time a nonce of TimeNonce stands for, to the
// nanosecond below.
func NonceTime(nonce uint64) time.Time {
	ns := (nonce & 0xffffffff) * uint64(time.Second) >> 32
	return time.Unix(int64(nonce>>32), int64(ns))
}
