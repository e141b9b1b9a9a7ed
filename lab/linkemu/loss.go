package linkemu

import "math/rand/v2"

// lossState is the state of one direction's loss model: the
// Gilbert-Elliott chain's state and the random numbers that drive it.
type lossState struct {
	rng *rand.Rand
	bad bool
}

func newLossState(seed uint64, d Direction) lossState {
	return lossState{rng: rand.New(rand.NewPCG(seed, uint64(d)))}
}

// lose decides whether the next frame is lost under l, and steps the
// chain (see Loss for the order).
func (s *lossState) lose(l *Loss) bool {
	if l.Model == Bernoulli {
		return l.P > 0 && s.rng.Float64() < l.P
	}
	p := l.LossGood
	if s.bad {
		p = l.LossBad
	}
	lost := p > 0 && s.rng.Float64() < p
	if s.bad {
		s.bad = !(s.rng.Float64() < l.R)
	} else {
		s.bad = s.rng.Float64() < l.P
	}
	return lost
}
