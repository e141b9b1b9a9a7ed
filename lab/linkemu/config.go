package linkemu

import (
	"fmt"
	"math"
	"time"

	"github.com/amptcp/amptcp/config"
)

// Limits of the frames an emulated link carries.
const (
	// EthernetHeader is what a TAP frame carries besides its IP packet:
	// destination and source MAC and the EtherType, plus room for one
	// VLAN tag.
	EthernetHeader = 18
	// MinMTU is the smallest MTU an IPv6 link may have (RFC 8200).
	MinMTU = 1280
	// MaxMTU is the largest MTU this emulator accepts; frames are copied
	// into buffers of this size.
	MaxMTU = 9000
	// DefaultMTU is the MTU of a link whose configuration gives none.
	DefaultMTU = 1500
)

// Direction is one way of a link: from its A end to its B end, or back.
type Direction uint8

const (
	AToB Direction = iota
	BToA
)

func (d Direction) String() string {
	switch d {
	case AToB:
		return "a-to-b"
	case BToA:
		return "b-to-a"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// LossModel says how frames are lost.
type LossModel uint8

const (
	// Bernoulli loses each frame independently with probability P.
	Bernoulli LossModel = iota
	// GilbertElliott loses frames in bursts: a two-state Markov chain
	// (good, bad) steps once per frame; see Loss.
	GilbertElliott
)

func (m LossModel) String() string {
	switch m {
	case Bernoulli:
		return "bernoulli"
	case GilbertElliott:
		return "gilbert-elliott"
	}
	return fmt.Sprintf("LossModel(%d)", uint8(m))
}

// Loss is a loss model and its parameters. The zero value loses nothing.
//
// Bernoulli: each frame is lost with probability P; R, LossGood and
// LossBad must be zero.
//
// Gilbert-Elliott: for each frame, the chain first decides the frame's
// fate in its current state (lost with probability LossGood in the good
// state, LossBad in the bad one) and then steps: good to bad with
// probability P, bad to good with probability R. The chain starts good.
// Over many frames the bad state holds a fraction P/(P+R) of them, bad
// runs last 1/R frames on average, and the loss rate is
// (R*LossGood + P*LossBad)/(P+R). The classic Gilbert model is
// LossGood=0, LossBad=1. (In the notation of netem's gemodel and
// RFC 6534's references: p=P, r=R, 1-k=LossGood, 1-h=LossBad.)
type Loss struct {
	Model             LossModel
	P, R              float64
	LossGood, LossBad float64
}

// Rate is the long-run fraction of frames the model loses.
func (l Loss) Rate() float64 {
	if l.Model == Bernoulli {
		return l.P
	}
	if l.P+l.R == 0 {
		return l.LossGood // never leaves the good state
	}
	return (l.R*l.LossGood + l.P*l.LossBad) / (l.P + l.R)
}

// Params are the properties of one direction of a link.
type Params struct {
	// Rate is the serializer's rate in bit/s of Ethernet frames
	// (header included): a frame of n bytes occupies the link for
	// n*8/Rate seconds.
	Rate float64
	// Delay is the propagation delay added after serialization.
	Delay time.Duration
	// Loss drops frames before they are queued.
	Loss Loss
	// QueueBytes bounds the drop-tail queue in front of the serializer,
	// the frame being serialized included.
	QueueBytes int
}

// LinkConfig describes one emulated link: two TAP devices, each in its
// own network namespace, and what happens to frames between them.
type LinkConfig struct {
	A, B Endpoint
	// MTU of both TAP devices (DefaultMTU when 0).
	MTU int
	// AB and BA are the two directions.
	AB, BA Params
	// Seed seeds the loss models' random numbers, so that a run can be
	// repeated frame for frame.
	Seed uint64
}

// Endpoint is where one end of a link lives.
type Endpoint struct {
	// Namespace is the name of a network namespace under /run/netns
	// (as `ip netns` names it); empty means the caller's namespace.
	Namespace string
	// Name is the TAP device's name, at most 15 bytes.
	Name string
}

// Params returns the parameters of direction d.
func (c *LinkConfig) Params(d Direction) *Params {
	if d == BToA {
		return &c.BA
	}
	return &c.AB
}

// Validate returns every problem of the link's configuration at once, as
// config.Errors with paths such as "ab.rate" and "b.name".
func (c *LinkConfig) Validate() error {
	var ck checker
	mtu := c.mtu()
	if mtu < MinMTU || mtu > MaxMTU {
		ck.add("mtu", "%d is not between %d and %d", mtu, MinMTU, MaxMTU)
	}
	for _, e := range []struct {
		path string
		ep   Endpoint
	}{{"a", c.A}, {"b", c.B}} {
		if e.ep.Name == "" || len(e.ep.Name) > 15 {
			ck.add(e.path+".name", "%q is not an interface name of 1 to 15 bytes", e.ep.Name)
		}
	}
	if c.A == c.B {
		ck.add("b", "is the same device as a")
	}
	for _, d := range []Direction{AToB, BToA} {
		ck.errs = append(ck.errs, c.Params(d).validate(dirPath(d), mtu)...)
	}
	if len(ck.errs) > 0 {
		return ck.errs
	}
	return nil
}

func (c *LinkConfig) mtu() int {
	if c.MTU == 0 {
		return DefaultMTU
	}
	return c.MTU
}

// dirPath is the name of a direction's parameters in error paths.
func dirPath(d Direction) string {
	if d == BToA {
		return "ba"
	}
	return "ab"
}

// Validate returns the problems of one direction's parameters for a link
// of the given MTU, with paths such as "rate" and "loss.p".
func (p *Params) Validate(mtu int) error {
	if errs := p.validate("", mtu); len(errs) > 0 {
		return errs
	}
	return nil
}

func (p *Params) validate(prefix string, mtu int) config.Errors {
	ck := checker{prefix: prefix}
	if !(p.Rate > 0) || math.IsInf(p.Rate, 0) {
		ck.add("rate", "%g bit/s is not a positive rate", p.Rate)
	}
	if p.Delay < 0 {
		ck.add("delay", "%v is negative", p.Delay)
	}
	if p.QueueBytes < mtu+EthernetHeader {
		ck.add("queue-bytes", "%d bytes do not hold one frame of %d bytes (MTU %d and the Ethernet header)",
			p.QueueBytes, mtu+EthernetHeader, mtu)
	}
	l := p.Loss
	probs := []struct {
		name string
		v    float64
	}{{"p", l.P}, {"r", l.R}, {"loss-good", l.LossGood}, {"loss-bad", l.LossBad}}
	for _, pr := range probs {
		if !(pr.v >= 0 && pr.v <= 1) {
			ck.add("loss."+pr.name, "%g is not a probability in [0, 1]", pr.v)
		}
	}
	switch l.Model {
	case Bernoulli:
		for _, pr := range probs[1:] {
			if pr.v != 0 {
				ck.add("loss."+pr.name, "only the gilbert-elliott model takes it")
			}
		}
	case GilbertElliott:
	default:
		ck.add("loss.model", "%v is not bernoulli or gilbert-elliott", l.Model)
	}
	return ck.errs
}

// checker collects the problems of a configuration, under a path prefix.
type checker struct {
	prefix string
	errs   config.Errors
}

func (ck *checker) add(path, format string, args ...any) {
	if ck.prefix != "" {
		path = ck.prefix + "." + path
	}
	ck.errs = append(ck.errs, config.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}
