package topo

import (
	"fmt"
	"strconv"
	"strings"
)

// NewEvent builds an event as people give one (`amptcp lab link`, the
// live view's controls): action down, up or set, a direction ("" for
// both), and for set the rate, delay, queue and Bernoulli loss ("0.01" or
// "1%") that are not empty. The link daemon checks the values when it
// applies the event.
func NewEvent(link, action, direction, rate, delay, loss, queue string) (Event, error) {
	ev := Event{Link: link, Action: Action(action), Direction: direction, Rate: rate, Delay: delay, Queue: queue}
	if ge, ok := strings.CutPrefix(loss, "ge:"); ok {
		// Gilbert-Elliott: p,r[,h[,k]] with netem's meaning.
		var v []*float64
		for _, f := range strings.Split(ge, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return ev, fmt.Errorf("loss: %q is not ge:P,R[,H,K] (Gilbert-Elliott)", loss)
			}
			v = append(v, &x)
		}
		if len(v) < 2 || len(v) > 4 {
			return ev, fmt.Errorf("loss: %q is not ge:P,R[,H,K] (Gilbert-Elliott)", loss)
		}
		g := &GilbertElliott{P: v[0], R: v[1]}
		if len(v) > 2 {
			g.H = v[2]
		}
		if len(v) > 3 {
			g.K = v[3]
		}
		ev.Loss = &Loss{GilbertElliott: g}
	} else if loss != "" {
		p, err := strconv.ParseFloat(strings.TrimSuffix(loss, "%"), 64)
		if err != nil {
			return ev, fmt.Errorf("loss: %q is not a probability like 0.01 or 1%%, or ge:P,R[,H,K]", loss)
		}
		if strings.HasSuffix(loss, "%") {
			p /= 100
		}
		ev.Loss = &Loss{Bernoulli: &p}
	}
	switch ev.Action {
	case ActionDown, ActionUp:
		if rate != "" || delay != "" || loss != "" || queue != "" {
			return ev, fmt.Errorf("%s takes no rate, delay, loss or queue", action)
		}
	case ActionSet:
	default:
		return ev, fmt.Errorf("%q is not down, up or set", action)
	}
	if direction != "" && direction != "a-to-b" && direction != "b-to-a" {
		return ev, fmt.Errorf("direction: %q is not a-to-b or b-to-a", direction)
	}
	return ev, nil
}

// Detail says what an event changes beyond its link and action: "delay
// 30ms, loss 1%", "a-to-b rate 4Mbit", "end a".
func (e Event) Detail() string {
	var parts []string
	if e.Direction != "" {
		parts = append(parts, e.Direction)
	}
	if e.End != "" {
		parts = append(parts, "end "+e.End)
	}
	for _, f := range [][2]string{{"rate", e.Rate}, {"delay", e.Delay}, {"queue", e.Queue}} {
		if f[1] != "" {
			parts = append(parts, f[0]+" "+f[1])
		}
	}
	if l := e.Loss; l != nil {
		switch {
		case l.Bernoulli != nil:
			parts = append(parts, "loss "+strconv.FormatFloat(100**l.Bernoulli, 'g', 3, 64)+"%")
		case l.GilbertElliott != nil:
			parts = append(parts, "Gilbert-Elliott loss")
		}
	}
	return strings.Join(parts, " ")
}
