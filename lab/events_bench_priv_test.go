package lab

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// BenchmarkEventLateness measures how late `lab run` applies a timeline's
// events: the runner's applyEvents, on an emulated link of a lab that is
// up (through the link daemon's control socket), 20 events 50 ms apart
// taking it down and up. The reference, measured in the same run, is a
// bare timer on the same schedule: what Go's timers and the machine give
// any program. Target: p99 under 20 ms, a fifth of the 100 ms between the
// link samples that show an event's effect.
func BenchmarkEventLateness(b *testing.B) {
	st, opts, _ := upEmulated(b, "late")
	links, err := OpenLinks(st.Name, opts)
	if err != nil {
		b.Fatal(err)
	}
	const n, gap = 20, 50 * time.Millisecond
	events := make([]topo.Event, n)
	for i := range events {
		action := topo.ActionDown
		if i%2 == 1 {
			action = topo.ActionUp
		}
		events[i] = topo.Event{At: config.Duration{Duration: time.Duration(i+1) * gap}, Link: "r-h2", Action: action}
	}
	never := make(chan struct{})
	var late, ref []time.Duration
	for b.Loop() {
		out := make([]results.Event, n)
		for i, ev := range events {
			out[i] = results.Event{At: ev.At.Duration, Link: ev.Link, Action: string(ev.Action)}
		}
		applyEvents(context.Background(), links, events, time.Now(), never, out, noObserver{})
		for i, ev := range out {
			if ev.Error != "" || ev.AppliedAfter == 0 {
				b.Fatalf("event %d: %+v", i, ev)
			}
			late = append(late, ev.AppliedAfter-ev.At)
		}
		t0 := time.Now()
		for _, ev := range events {
			timer := time.NewTimer(time.Until(t0.Add(ev.At.Duration)))
			<-timer.C
			ref = append(ref, time.Since(t0)-ev.At.Duration)
		}
	}
	q := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	b.ReportMetric(float64(q(late, 0.5).Microseconds()), "p50-late-us")
	b.ReportMetric(float64(q(late, 0.99).Microseconds()), "p99-late-us")
	b.ReportMetric(float64(slices.Max(late).Microseconds()), "max-late-us")
	b.ReportMetric(float64(q(ref, 0.99).Microseconds()), "timer-p99-late-us")
	verdict := "MISSED"
	if q(late, 0.99) < 20*time.Millisecond {
		verdict = "MET"
	}
	b.Logf("%d events applied late by p50 %v, p99 %v, max %v; a bare timer p50 %v, p99 %v, max %v; target p99 < 20 ms: %s",
		len(late), q(late, 0.5), q(late, 0.99), slices.Max(late), q(ref, 0.5), q(ref, 0.99), slices.Max(ref), verdict)
}
