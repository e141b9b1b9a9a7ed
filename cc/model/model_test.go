package model

import (
	"math"
	"testing"
)

// subflows returns a connection of a with one subflow per (window, RTT
// in ms), each having published them.
func subflows(a Algo, wr ...[2]float64) (*Conn, []*Sock) {
	c := NewConn(a)
	var ss []*Sock
	for _, x := range wr {
		s := c.Join(TCP{Cwnd: uint32(x[0]), Ssthresh: 1, Clamp: 1 << 30, SRTT: uint32(x[1] * 1000), CwndLimited: true})
		s.publish()
		ss = append(ss, s)
	}
	return c, ss
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// RFC 6356 §3: with n equal paths alpha is 1/n and each ACK adds
// alpha/w_total, a credit of alpha*w_r/w_total = 1/n^2 packets per
// packet of window: in equilibrium the connection takes what one TCP
// would. On one path LIA is Reno.
func TestLIAAlpha(t *testing.T) {
	for n := 1; n <= 4; n++ {
		var wr [][2]float64
		for range n {
			wr = append(wr, [2]float64{20, 50})
		}
		c, ss := subflows(LIA, wr...)
		credit := c.liaCredit(ss[0], c.peers())
		near(t, "alpha", c.Alpha, 1/float64(n))
		near(t, "credit", credit, 1/float64(n*n))
	}
	// A path twice as fast (half the RTT) with the same window: alpha =
	// w_total*max(w/rtt^2)/(sum w/rtt)^2 = 20 * 10/25^2 / (10/25+10/50)^2.
	c, ss := subflows(LIA, [2]float64{10, 25}, [2]float64{10, 50})
	c.liaCredit(ss[1], c.peers())
	near(t, "alpha", c.Alpha, 20*(10.0/625)/math.Pow(10.0/25+10.0/50, 2))
}

// [Khalili12] §IV: alpha_r is positive on the best paths that have not
// the largest window, negative on those of the largest window, and the
// same for all when the best path has the largest window.
func TestOLIAAlpha(t *testing.T) {
	c, ss := subflows(OLIA, [2]float64{40, 50}, [2]float64{10, 50})
	// Bytes between losses: the last interval (the current one is empty).
	ss[0].pub.acked, ss[0].pub.lossMark, ss[0].pub.lossPrev = 1e6, 1e6, 1e5
	ss[1].pub.acked, ss[1].pub.lossMark, ss[1].pub.lossPrev = 1e6, 1e6, 1e6
	ps := c.peers()
	c.oliaCredit(ss[0], ps)
	c.oliaCredit(ss[1], ps)
	near(t, "alpha of the largest window", ss[0].Alpha(), -0.5)
	near(t, "alpha of the best path", ss[1].Alpha(), 0.5)
	ss[0].pub.lossPrev = 1e6 // now both are best, and 0 has the largest window
	ss[1].pub.lossPrev = 1e5
	c.oliaCredit(ss[0], ps)
	c.oliaCredit(ss[1], ps)
	near(t, "alpha", ss[0].Alpha(), 0)
	near(t, "alpha", ss[1].Alpha(), 0)
}

// [Peng16]: on one path BALIA is Reno (credit 1, halving); a path far
// slower than the best has a large a_r and loses three quarters.
func TestBALIA(t *testing.T) {
	c, ss := subflows(BALIA, [2]float64{30, 40})
	near(t, "credit", c.baliaCredit(ss[0], c.peers()), 1)
	if got := c.baliaSsthresh(ss[0]); got != 15 {
		t.Errorf("ssthresh on one path = %d, want 15", got)
	}
	c, ss = subflows(BALIA, [2]float64{40, 40}, [2]float64{20, 200})
	c.baliaCredit(ss[1], c.peers())
	near(t, "a_r", ss[1].Alpha(), (40.0/40)/(20.0/200))
	if got := c.baliaSsthresh(ss[1]); got != 20-15 { // 20 - 20/2*1.5
		t.Errorf("ssthresh of the slow path = %d, want 5", got)
	}
}
