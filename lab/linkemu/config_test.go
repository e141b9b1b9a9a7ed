package linkemu

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
)

func validLink() LinkConfig {
	p := Params{Rate: 50e6, Delay: 10 * time.Millisecond, QueueBytes: 64 << 10}
	return LinkConfig{
		A:  Endpoint{Namespace: "left", Name: "wan0"},
		B:  Endpoint{Namespace: "right", Name: "wan0"},
		AB: p, BA: p,
	}
}

func TestValidateAcceptsAValidLink(t *testing.T) {
	c := validLink()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.AB.Loss = Loss{Model: GilbertElliott, P: 0.01, R: 0.5, LossGood: 0, LossBad: 1}
	c.BA.Delay = 0
	c.MTU = 9000
	c.AB.QueueBytes, c.BA.QueueBytes = 9018, 9018
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	c := validLink()
	c.MTU = 20000
	c.B = c.A
	c.AB.Rate = 0
	c.AB.Delay = -time.Millisecond
	c.AB.Loss.P = 1.5
	c.AB.Loss.R = 0.2 // Bernoulli takes no r
	c.BA.QueueBytes = 1000
	c.BA.Loss = Loss{Model: 7}
	err := c.Validate()
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v is not config.Errors", err)
	}
	paths := map[string]bool{}
	for _, fe := range errs {
		paths[fe.Path] = true
	}
	for _, want := range []string{"mtu", "b", "ab.rate", "ab.delay", "ab.loss.p", "ab.loss.r", "ba.queue-bytes", "ba.loss.model"} {
		if !paths[want] {
			t.Errorf("no problem reported at %s in:\n%v", want, err)
		}
	}
	if len(errs) != 8 {
		t.Errorf("%d problems, want 8:\n%v", len(errs), err)
	}
}

func TestValidateQueueHoldsOneFrame(t *testing.T) {
	p := Params{Rate: 1e6, QueueBytes: 1517}
	err := p.Validate(1500)
	if err == nil || !strings.Contains(err.Error(), "queue-bytes: 1517 bytes do not hold one frame of 1518") {
		t.Fatalf("got %v, want a queue-bytes problem", err)
	}
	p.QueueBytes = 1518
	if err := p.Validate(1500); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheInterface(t *testing.T) {
	c := validLink()
	c.A.Name = "a-name-longer-than-15"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "a.name:") {
		t.Fatalf("got %v, want a problem at a.name", err)
	}
}

func TestLossRate(t *testing.T) {
	if got := (Loss{P: 0.1}).Rate(); got != 0.1 {
		t.Errorf("bernoulli rate %g", got)
	}
	ge := Loss{Model: GilbertElliott, P: 0.1, R: 0.3, LossGood: 0.01, LossBad: 0.5}
	if got, want := ge.Rate(), (0.3*0.01+0.1*0.5)/0.4; got != want {
		t.Errorf("gilbert-elliott rate %g, want %g", got, want)
	}
}
