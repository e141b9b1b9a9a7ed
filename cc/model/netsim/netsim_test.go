package netsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/cc/model"
)

// capacity is a 10 Mbit/s link's goodput: 1448 bytes of payload in
// 1514-byte frames.
const capacity = 10 * float64(MSS) / frameSize

// The simulator itself: one Reno flow fills a link whose queue is one
// bandwidth-delay product (Reno's halving leaves the window at the
// product), and two share it about evenly.
func TestRenoFillsAndShares(t *testing.T) {
	s := New(1)
	l := s.NewLink(10e6, 10*time.Millisecond, 1)
	a := s.NewFlow(model.NewPlain(model.Reno, InitTCP()), l, 0)
	s.Run(3 * time.Second)
	m := s.Start(a)
	s.Run(13 * time.Second)
	if g := m.Goodput(s, 0); g < 0.95*capacity {
		t.Errorf("one Reno flow: %.2f Mbit/s of %.2f", g, capacity)
	}
	b := s.NewFlow(model.NewPlain(model.Reno, InitTCP()), l, 13*time.Second)
	s.Run(20 * time.Second)
	m = s.Start(a, b)
	s.Run(50 * time.Second)
	ga, gb := m.Goodput(s, 0), m.Goodput(s, 1)
	t.Logf("two Reno flows: %.2f and %.2f Mbit/s", ga, gb)
	if ga+gb < 0.95*capacity || ga < 0.3*capacity || gb < 0.3*capacity {
		t.Errorf("two Reno flows: %.2f and %.2f Mbit/s of %.2f", ga, gb, capacity)
	}
}

// friendliness runs cc/proof_priv_test.go's TestFriendliness in the
// simulator: [Khalili12]'s scenario of problem P2, a multipath user with
// a path of its own and a path shared with a TCP user, both 10 Mbit/s,
// 20 ms, queues of one bandwidth-delay product. It returns the multipath
// user's rates on each path and the TCP user's share of the shared one.
func friendliness(a model.Algo, seed uint64) (own, shared, tcpShare float64) {
	s, f1, f2, tcp := friendlinessNet(a, seed)
	s.Run(6 * time.Second)
	m := s.Start(f1, f2, tcp)
	s.Run(30 * time.Second)
	return m.AckedRate(s, 0), m.AckedRate(s, 1), m.Goodput(s, 2) / capacity
}

// friendlinessNet builds friendliness's scenario: the multipath user's
// subflows on its own path and on the shared one, and the TCP user.
func friendlinessNet(a model.Algo, seed uint64) (s *Sim, own, shared, tcp *Flow) {
	s = New(seed)
	l1 := s.NewLink(10e6, 10*time.Millisecond, 1)
	l2 := s.NewLink(10e6, 10*time.Millisecond, 1)
	c := model.NewConn(a)
	own = s.NewFlow(c.Join(InitTCP()), l1, 0)
	shared = s.NewFlow(c.Join(InitTCP()), l2, 50*time.Millisecond)
	tcp = s.NewFlow(model.NewPlain(model.Reno, InitTCP()), l2, 10*time.Millisecond)
	return s, own, shared, tcp
}

// The claims TestFriendliness checks on the lab's links hold for the
// model on an idealised network (no MPTCP scheduler, no head-of-line
// blocking, no CPU): LIA leaves the TCP user more than uncoupled Reno,
// OLIA at least 0.8 and clearly more than LIA, BALIA as much as LIA.
func TestFriendlinessModel(t *testing.T) {
	share := map[model.Algo]float64{}
	for _, a := range []model.Algo{model.Reno, model.LIA, model.OLIA, model.BALIA} {
		var shares []float64
		for seed := uint64(1); seed <= 3; seed++ {
			own, shared, sh := friendliness(a, seed)
			t.Logf("%s, seed %d: own path %.2f, shared path %.2f Mbit/s, TCP share %.3f", a, seed, own, shared, sh)
			shares = append(shares, sh)
			if a != model.Reno && own+shared < 0.9*capacity {
				t.Errorf("%s: the multipath user got %.2f Mbit/s", a, own+shared)
			}
		}
		share[a] = median(shares)
	}
	if share[model.LIA] < share[model.Reno]+0.05 {
		t.Errorf("LIA left the TCP user %.3f, uncoupled Reno %.3f", share[model.LIA], share[model.Reno])
	}
	// The bound of TestFriendliness, argued there: at least 0.8, and
	// half-way from LIA's share to the most that OLIA's two-packet floor
	// allows (two packets per 20 ms base RTT on the shared path).
	ceiling := 1 - 2*float64(MSS)*8/0.020/1e6/capacity
	if want := share[model.LIA] + (ceiling-share[model.LIA])/2; share[model.OLIA] < 0.8 || share[model.OLIA] < want {
		t.Errorf("OLIA left the TCP user %.3f, want %.3f (LIA %.3f)", share[model.OLIA], want, share[model.LIA])
	}
	if share[model.BALIA] < share[model.LIA]-0.05 {
		t.Errorf("BALIA left the TCP user %.3f, LIA %.3f", share[model.BALIA], share[model.LIA])
	}
}

// TestWVegasModel is TestWVegasLeavesAGrowingQueue in the simulator:
// two disjoint 10 Mbit/s, 20 ms paths with queues of four
// bandwidth-delay products; a Reno flow joins path 2 and fills its
// queue. wVegas ([Cao12]) leaves path 2 and fills path 1; LIA keeps more
// of path 2.
func TestWVegasModel(t *testing.T) {
	onPath2 := map[model.Algo]float64{}
	for _, a := range []model.Algo{model.WVegas, model.LIA} {
		s := New(1)
		l1 := s.NewLink(10e6, 10*time.Millisecond, 4)
		l2 := s.NewLink(10e6, 10*time.Millisecond, 4)
		c := model.NewConn(a)
		f1 := s.NewFlow(c.Join(InitTCP()), l1, 0)
		f2 := s.NewFlow(c.Join(InitTCP()), l2, 50*time.Millisecond)
		s.Run(4 * time.Second)
		m := s.Start(f1, f2)
		s.Run(12 * time.Second)
		p1, p2 := m.AckedRate(s, 0), m.AckedRate(s, 1)
		t.Logf("%s alone: path 1 %.2f, path 2 %.2f Mbit/s", a, p1, p2)
		if p1 < 0.8*capacity || p2 < 0.8*capacity {
			t.Errorf("%s alone: %.2f and %.2f Mbit/s", a, p1, p2)
		}
		tcp := s.NewFlow(model.NewPlain(model.Reno, InitTCP()), l2, 12*time.Second)
		s.Run(17 * time.Second)
		m = s.Start(f1, f2, tcp)
		s.Run(29 * time.Second)
		p1, p2 = m.AckedRate(s, 0), m.AckedRate(s, 1)
		t.Logf("%s with TCP on path 2: path 1 %.2f, path 2 %.2f, TCP %.2f Mbit/s", a, p1, p2, m.Goodput(s, 2))
		onPath2[a] = p2
		if a == model.WVegas && (p1 < 0.8*capacity || p2 > 0.15*capacity) {
			t.Errorf("wVegas with TCP on path 2: path 1 %.2f, path 2 %.2f Mbit/s", p1, p2)
		}
	}
	if onPath2[model.LIA] < 2*onPath2[model.WVegas] {
		t.Errorf("on the path with the growing queue: LIA %.2f, wVegas %.2f Mbit/s", onPath2[model.LIA], onPath2[model.WVegas])
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// subflows is what a variant of sharedBottleneck changes in the
// connection's subflows: a window clamp in packets (0: none), and how
// many segments their receiver takes before it acknowledges them (0: two).
type subflows struct {
	clamp    uint32
	ackEvery int
}

// sharedBottleneck runs cc/proof_priv_test.go's TestSharedBottleneck in
// the simulator: one 20 Mbit/s, 20 ms link whose queue is one
// bandwidth-delay product, a connection of two subflows under a (two
// plain Reno sockets for model.Reno) and a Reno TCP flow (for wVegas, a
// wVegas connection of one subflow), 4 s of warm-up and 10 s measured.
// The second subflow and the TCP flow start at offsets drawn from seed,
// as the rig's handshakes and MP_JOIN vary. It returns the connection's
// share of what the two got.
func sharedBottleneck(a model.Algo, seed uint64, v subflows) float64 {
	s := New(seed)
	l := s.NewLink(20e6, 10*time.Millisecond, 1)
	r := rand.New(rand.NewPCG(seed, 7))
	sub := InitTCP()
	if v.clamp > 0 {
		sub.Clamp = v.clamp
	}
	var s1, s2, st *model.Sock
	if a == model.Reno {
		s1, s2 = model.NewPlain(model.Reno, sub), model.NewPlain(model.Reno, sub)
	} else {
		c := model.NewConn(a)
		s1, s2 = c.Join(sub), c.Join(sub)
	}
	if a == model.WVegas {
		st = model.NewConn(model.WVegas).Join(InitTCP())
	} else {
		st = model.NewPlain(model.Reno, InitTCP())
	}
	sub1 := s.NewFlow(s1, l, 0)
	sub2 := s.NewFlow(s2, l, time.Duration(20+r.IntN(100))*time.Millisecond)
	tcp := s.NewFlow(st, l, time.Duration(r.IntN(100))*time.Millisecond)
	sub1.AckEvery, sub2.AckEvery = v.ackEvery, v.ackEvery
	s.Run(4 * time.Second)
	m := s.Start(sub1, sub2, tcp)
	s.Run(14 * time.Second)
	mptcp := m.AckedRate(s, 0) + m.AckedRate(s, 1)
	return mptcp / (mptcp + m.Goodput(s, 2))
}

// sharedClaims are TestSharedBottleneck's bounds (argued there) on the
// shares of repetitions: uncoupled Reno's median at least 0.55; each
// coupled control's median within 0.35-0.6, and for the loss-based ones
// the median over repetitions of Reno's share minus theirs (repetition by
// repetition) at least 0.07. It returns the bounds missed.
func sharedClaims(reno []float64, coupled map[model.Algo][]float64) []string {
	var missed []string
	if m := median(reno); m < 0.55 {
		missed = append(missed, fmt.Sprintf("reno %.3f", m))
	}
	for a, shares := range coupled {
		if m := median(shares); m < 0.35 || m > 0.6 {
			missed = append(missed, fmt.Sprintf("%s %.3f", a, m))
		}
		if a == model.WVegas {
			continue
		}
		var gaps []float64
		for i, s := range shares {
			gaps = append(gaps, reno[i]-s)
		}
		if g := median(gaps); g < 0.07 {
			missed = append(missed, fmt.Sprintf("%s below reno by %.3f", a, g))
		}
	}
	slices.Sort(missed)
	return missed
}

// On TestSharedBottleneck's scenario the model gives what the textbook
// says: two uncoupled Reno subflows take two thirds of the link from one
// Reno TCP flow, each coupled control about half, with a spread from run
// to run of about ±0.13 (0.36-0.63 in 95 % of 200 runs of 10 s; LIA's and
// wVegas's do not narrow in runs of 40 s: LIA's subflows drift apart, and
// wVegas's base RTTs depend on which flow came first). The test's bounds
// hold on seven repetitions, and fail an uncoupled control (amp_* behaving
// as Reno), one that starves (subflows held at three packets), and a rig
// whose subflows are burstier than the TCP flow (their receiver
// acknowledging every fourth segment: two subflows then take about half).
func TestSharedBottleneckModel(t *testing.T) {
	const reps = 7
	run := func(what string, a model.Algo, seed0 uint64, v subflows) []float64 {
		var shares []float64
		for i := range uint64(reps) {
			shares = append(shares, sharedBottleneck(a, seed0+i, v))
		}
		t.Logf("%s: %.3f", what, shares)
		return shares
	}
	reno := run("reno", model.Reno, 1, subflows{})
	coupled := map[model.Algo][]float64{}
	for _, a := range []model.Algo{model.LIA, model.OLIA, model.BALIA, model.WVegas} {
		coupled[a] = run(a.String(), a, 100*uint64(a), subflows{})
	}
	if m := median(reno); m < 0.63 || m > 0.7 {
		t.Errorf("uncoupled Reno took %.3f, want about 2/3", m)
	}
	if missed := sharedClaims(reno, coupled); len(missed) > 0 {
		t.Errorf("the model missed the bounds: %v", missed)
	}
	uncoupled := run("reno as a coupled control", model.Reno, 1000, subflows{})
	if sharedClaims(reno, map[model.Algo][]float64{model.LIA: uncoupled}) == nil {
		t.Errorf("an uncoupled control met the bounds")
	}
	starving := run("lia held at three packets", model.LIA, 2000, subflows{clamp: 3})
	if sharedClaims(reno, map[model.Algo][]float64{model.LIA: starving}) == nil {
		t.Errorf("a control held at three packets met the bounds")
	}
	bursty := run("reno, subflows acknowledged every fourth segment", model.Reno, 3000, subflows{ackEvery: 4})
	if m := median(bursty); m >= 0.55 {
		t.Errorf("uncoupled Reno with subflows acknowledged every fourth segment took %.3f", m)
	}
}

// responsiveness runs cc/proof_priv_test.go's TestResponsiveness in the
// simulator: friendliness's scenario, and after 15 s the TCP user
// leaves. It returns how long the multipath user's subflow on the shared
// path then took to carry 0.7 of the path (its rate sampled every 500
// ms, two samples in a row, as the test's fillTime), within limit.
func responsiveness(a model.Algo, seed uint64, limit time.Duration) time.Duration {
	s, _, f2, tcp := friendlinessNet(a, seed)
	left := 15 * time.Second
	s.Run(left)
	tcp.Stop()
	const every = 500 * time.Millisecond
	streak := 0
	for at := every; at <= limit; at += every {
		acked := f2.Acked
		s.Run(left + at)
		rate := float64(f2.Acked-acked) * MSS * 8 / every.Seconds() / 1e6
		if rate < 0.7*capacity {
			streak = 0
		} else if streak++; streak == 2 {
			return at - every
		}
	}
	return limit
}

// On TestResponsiveness's scenario every coupled control takes the
// shared path back within a few seconds once the TCP user leaves: LIA
// in 1-2.5 s, BALIA in 2 s and OLIA in 1.5 s (nine runs each). OLIA is not
// the slow one here: with no more losses on the shared path, its loss
// interval there soon outgrows the other path's, whose queue still
// overflows, and the shared path joins its best paths. On the rig OLIA
// is the slower, as [Peng16] has it: what the model leaves out makes the
// difference (cc/proof_priv_test.go, TestResponsiveness).
func TestResponsivenessModel(t *testing.T) {
	for _, a := range []model.Algo{model.LIA, model.BALIA, model.OLIA} {
		var took []time.Duration
		for seed := uint64(1); seed <= 9; seed++ {
			took = append(took, responsiveness(a, seed, 60*time.Second))
		}
		t.Logf("%s: %v", a, took)
		if m := slices.Max(took); m > 10*time.Second {
			t.Errorf("%s took up to %v to use the path the TCP user left, want within 10 s", a, m)
		}
	}
}
