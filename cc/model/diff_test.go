//go:build cgo

package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/amptcp/amptcp/cc/internal/cref"
)

// impl is one implementation of a socket's callbacks: the model, or the
// C arithmetic of the BPF programs built for user space.
type impl interface {
	get() TCP
	set(TCP)
	CongAvoid(ack, acked uint32)
	LossSsthresh() uint32
	SetState(uint8)
	PktsAcked(int32)
	CwndEvent(uint8)
	leave()
}

type modelImpl struct{ *Sock }

func (m modelImpl) get() TCP  { return m.TCP }
func (m modelImpl) set(t TCP) { m.TCP = t }
func (m modelImpl) leave()    { m.Leave() }

type cImpl struct{ *cref.Sock }

func (c cImpl) get() TCP  { return TCP(c.Get()) }
func (c cImpl) set(t TCP) { c.Set(cref.TCP(t)) }
func (c cImpl) leave()    { c.Leave() }

const mss = 1448

// sim is the part of the kernel's TCP around a congestion control: it
// turns ACKs and losses into callbacks, for one implementation.
type sim struct {
	impl  impl
	una   uint32
	state uint8
	left  int // ACKs until the loss is repaired
}

func (s *sim) ack(acked uint32, srtt uint32, sample int32, limited bool) {
	t := s.impl.get()
	s.una += acked * mss
	t.BytesAcked += uint64(acked) * mss
	t.SRTT = srtt
	t.SndNxt = s.una + t.Cwnd*mss
	t.CwndLimited = limited
	s.impl.set(t)
	s.impl.PktsAcked(sample)
	if s.state == StateRecovery {
		if s.left--; s.left <= 0 {
			t := s.impl.get()
			t.Cwnd = t.Ssthresh
			s.impl.set(t)
			s.state = StateOpen
			s.impl.SetState(StateOpen)
		}
		return
	}
	s.impl.CongAvoid(s.una, acked)
	if s.state == StateLoss {
		if s.left--; s.left <= 0 {
			s.state = StateOpen
			s.impl.SetState(StateOpen)
		}
	}
}

func (s *sim) loss(timeout bool, repair int) {
	if s.state != StateOpen {
		return
	}
	t := s.impl.get()
	t.PriorCwnd = t.Cwnd
	s.impl.set(t)
	ss := s.impl.LossSsthresh()
	t = s.impl.get()
	t.Ssthresh = ss
	t.CwndCnt = 0
	s.state = StateRecovery
	if timeout {
		t.Cwnd = 1
		s.state = StateLoss
	}
	s.impl.set(t)
	s.impl.SetState(s.state)
	s.left = repair
}

// scenario is a random sequence of events on the subflows of a
// connection: each path has its base RTT, an RTT that swings with a
// queue, a loss rate; subflows join late and leave early.
type scenario struct {
	seed  uint64
	paths int
	steps int
}

// deviation sums up |cwnd_c - cwnd_model| / max(cwnd_model, 10) over
// the comparisons of a scenario.
type deviation struct {
	all      []float64
	worst    float64
	at       int
	c, model uint32
	sum      float64
	windows  float64 // sum of the model's windows, for their mean
}

func (d *deviation) add(step int, c, m uint32) {
	v := math.Abs(float64(c)-float64(m)) / math.Max(float64(m), 10)
	d.all = append(d.all, v)
	d.sum += v
	d.windows += float64(m)
	if v > d.worst {
		d.worst, d.at, d.c, d.model = v, step, c, m
	}
}

func (d *deviation) mean() float64 { return d.sum / float64(max(len(d.all), 1)) }

// quantile is the deviation that a fraction q of the comparisons stay
// within.
func (d *deviation) quantile(q float64) float64 {
	if len(d.all) == 0 {
		return 0
	}
	s := slices.Clone(d.all)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func (d *deviation) String() string {
	return fmt.Sprintf("mean deviation %.4f, 99th percentile %.3f, 99.9th percentile %.3f, worst %.3f at step %d (C %d, model %d); mean window %.1f",
		d.mean(), d.quantile(0.99), d.quantile(0.999), d.worst, d.at, d.c, d.model, d.windows/float64(max(len(d.all), 1)))
}

// run drives the C build of algo and the model of mAlgo with the same
// events and returns how far their windows went apart.
func (sc scenario) run(t *testing.T, algo, mAlgo Algo, multipath bool) *deviation {
	t.Helper()
	rng := rand.New(rand.NewPCG(sc.seed, 7))
	type path struct {
		base, swing, period float64 // µs, µs, steps
		loss                float64 // per ACK
		join, leave         int     // steps
	}
	paths := make([]path, sc.paths)
	for i := range paths {
		base := 5000 + rng.Float64()*150000
		paths[i] = path{base: base, swing: base * rng.Float64() * 0.6, period: 200 + rng.Float64()*3000,
			loss: 0.0002 + rng.Float64()*0.003, join: 0, leave: sc.steps}
		if i > 0 && rng.IntN(2) == 0 {
			paths[i].join = rng.IntN(sc.steps / 3)
		}
		if i > 0 && rng.IntN(4) == 0 {
			paths[i].leave = sc.steps/2 + rng.IntN(sc.steps/2)
		}
	}
	init := TCP{Cwnd: 10, Ssthresh: 0x7fffffff, Clamp: 0xffffffff}
	var cc *cref.Conn
	var mc *Conn
	if multipath {
		cc = cref.NewConn(int(algo))
		defer cc.Free()
		mc = NewConn(mAlgo)
	}
	cs := make([]*sim, sc.paths)
	ms := make([]*sim, sc.paths)
	gone := make([]bool, sc.paths)
	dev := &deviation{}
	for step := 0; step < sc.steps; step++ {
		i := rng.IntN(sc.paths)
		p := paths[i]
		if step >= p.join && !gone[i] && cs[i] == nil && (multipath || i == 0) {
			if multipath {
				cs[i] = &sim{impl: cImpl{cref.NewSock(int(algo), cc, uint32(i+1), cref.TCP(init))}}
				ms[i] = &sim{impl: modelImpl{mc.Join(init)}}
			} else {
				cs[i] = &sim{impl: cImpl{cref.NewSock(int(algo), nil, 0, cref.TCP(init))}}
				ms[i] = &sim{impl: modelImpl{NewPlain(mAlgo, init)}}
			}
			defer cs[i].impl.(cImpl).Free()
		}
		if cs[i] == nil {
			continue
		}
		if step >= p.leave {
			cs[i].impl.leave()
			ms[i].impl.leave()
			cs[i], ms[i] = nil, nil
			gone[i] = true
			continue
		}
		srtt := uint32(p.base + p.swing*(1+math.Sin(float64(step)/p.period))/2)
		sample := int32(float64(srtt) * (0.9 + 0.2*rng.Float64()))
		limited := rng.IntN(50) != 0
		acked := uint32(1 + rng.IntN(2))
		x := rng.Float64()
		for _, s := range []*sim{cs[i], ms[i]} {
			switch {
			case x < p.loss/20:
				s.loss(true, 5+int(x*1e6)%30)
			case x < p.loss:
				s.loss(false, 3+int(x*1e6)%20)
			case x < p.loss+0.0005:
				s.impl.CwndEvent(EventTxStart)
			default:
				s.ack(acked, srtt, sample, limited)
			}
		}
		dev.add(step, cs[i].impl.get().Cwnd, ms[i].impl.get().Cwnd)
		if c, m := cs[i].impl.get().Ssthresh, ms[i].impl.get().Ssthresh; c < 1<<30 || m < 1<<30 {
			dev.add(step, min(c, 1<<20), min(m, 1<<20)) // ssthresh starts "infinite"
		}
	}
	return dev
}

// Tolerances of the differential test, on the deviations of all the
// comparisons of a scenario (cwnd and ssthresh after each event,
// relative to the model's window, at least 10 packets). The fixed point
// rounds each credit to 2^-16 and each coupling ratio to 2^-16 of its
// value, which moves an increase by one ACK now and then: the windows
// then differ by a packet until a loss pulls both down again. The mean
// must stay below meanTol and a fraction tailQ of the comparisons below
// tailTol. wVegas decides once per RTT whether its queue is above its
// target, and whether to drain it, from values that the two compute
// with different rounding: when one lies within 2^-16 packets of its
// threshold the decision can go the other way, and the windows then
// differ by up to a halving for the rounds it takes them to meet again,
// so its tail is the 99th percentile.
const (
	meanTol = 0.02
	tailTol = 0.15
)

func (d *deviation) within(a Algo) bool {
	tailQ := 0.999
	if a == WVegas {
		tailQ = 0.99
	}
	return d.mean() <= meanTol && d.quantile(tailQ) <= tailTol
}

func TestDifferential(t *testing.T) {
	if !cref.Available {
		t.Skip("needs cgo for the C build of the congestion controls")
	}
	for _, algo := range []Algo{Reno, LIA, OLIA, BALIA, WVegas} {
		for _, multipath := range []bool{true, false} {
			for seed := uint64(1); seed <= 60; seed++ {
				sc := scenario{seed: seed, paths: 1 + int(seed%4), steps: 40000}
				name := fmt.Sprintf("%s/mptcp=%v/seed=%d/paths=%d", algo, multipath, seed, sc.paths)
				t.Run(name, func(t *testing.T) {
					d := sc.run(t, algo, algo, multipath)
					t.Log(d.String())
					if !d.within(algo) {
						t.Errorf("C and model apart (limits: mean %.2f, tail %.2f): %s", meanTol, tailTol, d)
					}
				})
			}
		}
	}
}

// TestDifferentialDiscriminates checks that the tolerances tell the
// algorithms apart: the C build of one against the model of another
// leaves them, on scenarios with several paths.
func TestDifferentialDiscriminates(t *testing.T) {
	if !cref.Available {
		t.Skip("needs cgo for the C build of the congestion controls")
	}
	for _, pair := range [][2]Algo{{LIA, Reno}, {OLIA, LIA}, {BALIA, LIA}, {LIA, BALIA}, {WVegas, Reno}} {
		apart := 0
		for seed := uint64(1); seed <= 6; seed++ {
			sc := scenario{seed: seed, paths: 2 + int(seed%3), steps: 40000}
			d := sc.run(t, pair[0], pair[1], true)
			t.Logf("C %s, model %s, seed %d: %s", pair[0], pair[1], seed, d)
			if !d.within(pair[0]) {
				apart++
			}
		}
		if apart < 4 {
			t.Errorf("C %s against the model of %s: within the tolerances in %d of 6 scenarios; the test would not see one algorithm replaced by the other", pair[0], pair[1], 6-apart)
		}
	}
}
