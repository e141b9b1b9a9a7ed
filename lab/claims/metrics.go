package claims

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// metric is a quantity measured on one flow of one run.
type metric struct {
	unit  string
	about string
	// windowed metrics take a claim's window.
	windowed bool
	// kinds are the flows it applies to when a claim names none.
	kinds []traffic.Kind
	// failed: the metric is measured on flows that ended with an error
	// too (whether they connected).
	failed  bool
	measure func(v *runView, f *results.Flow, w Window) (float64, bool)
}

var streams = []traffic.Kind{traffic.Transfer, traffic.Saturate, traffic.Iperf3}

// metrics are the metrics claims may name. docs/lab.md ("Claims") says
// what each measures.
var metrics = map[string]metric{
	"goodput": {unit: "Mbit/s", windowed: true, kinds: streams,
		about:   "the receiver's payload rate: bytes over the flow's time, or over the window",
		measure: goodput},
	"completion": {unit: "s", kinds: []traffic.Kind{traffic.Transfer},
		about: "a transfer's completion time at the client, handshake included",
		measure: func(_ *runView, f *results.Flow, _ Window) (float64, bool) {
			return f.Client.Completion.Seconds(), f.Client.Completion > 0
		}},
	"jitter": {unit: "ms", windowed: true, kinds: []traffic.Kind{traffic.Transfer, traffic.Saturate},
		about:   "the standard deviation of the gaps between the receiver's 16 KiB data units",
		measure: jitter},
	"max-gap": {unit: "ms", kinds: []traffic.Kind{traffic.Transfer, traffic.Saturate},
		about: "the longest gap between two data units at the receiver: the longest stall",
		measure: func(_ *runView, f *results.Flow, _ Window) (float64, bool) {
			return ms(f.Receiver.MaxGap), f.Receiver.Kind != 0
		}},
	"loss": {unit: "share", kinds: streams,
		about:   "the mean over the flow's subflows of their retransmitted bytes over their bytes sent",
		measure: loss},
	"rtos": {unit: "RTOs", kinds: streams,
		about:   "the retransmission timeouts of the flow's subflows, summed (tcp_info's total_rto)",
		measure: rtos},
	"rtt-spread": {unit: "ms", kinds: streams,
		about: "the largest minus the smallest of the subflows' median smoothed RTTs",
		measure: func(v *runView, f *results.Flow, _ Window) (float64, bool) {
			d, ok := results.RTTSpread(v.subflows[f.ID])
			return ms(d), ok
		}},
	"high-rtt-share": {unit: "share", kinds: streams,
		about:   "the share of the flow's acknowledged bytes that its subflows of a median RTT above 1.5 times the fastest's carried",
		measure: highRTTShare},
	"subflows": {unit: "subflows", kinds: streams,
		about: "the most subflows the connection had at once",
		measure: func(_ *runView, f *results.Flow, _ Window) (float64, bool) {
			n := max(f.Client.Subflows, f.Receiver.Subflows)
			return float64(n), n > 0
		}},
	"connected": {unit: "share", kinds: streams, failed: true,
		about: "1 if the flow connected, 0 if it did not within its connect-timeout",
		measure: func(_ *runView, f *results.Flow, _ Window) (float64, bool) {
			if strings.HasPrefix(f.Error, results.NotConnected) {
				return 0, true
			}
			return 1, f.Error == ""
		}},
	"recovery": {unit: "ratio", kinds: streams,
		about:   "goodput after (from 5 s after the last event) over goodput before the first event",
		measure: windowRatio(WindowAfter, WindowBefore)},
	"failure-ratio": {unit: "ratio", kinds: streams,
		about:   "goodput during the failure (all its links down) over goodput before it",
		measure: windowRatio(WindowDuring, WindowBefore)},
	"reaction": {unit: "s", kinds: streams,
		about:   "from the first event until the goodput over 200 ms reaches 90 % of what the path left can carry",
		measure: reaction},
	"repair": {unit: "s", kinds: streams,
		about:   "from the last event until as many subflows carry data as before the first",
		measure: repair},
}

// MetricNames lists the metrics, sorted.
func MetricNames() []string { return sortedKeys(metrics) }

// MetricAbout says what a metric measures and in which unit.
func MetricAbout(name string) (about, unit string) {
	m := metrics[name]
	return m.about, m.unit
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// runView is one run's records, grouped for the metrics.
type runView struct {
	run      *results.Run
	origin   time.Time
	flows    []results.Flow
	subflows map[string][]results.SubflowSeries
	// received are each flow's receiver samples in time order.
	received map[string][]traffic.Record
	// events are the applied events' times since the origin, and
	// whether each took a link down (or changed it) or brought it up.
	events []event
}

type event struct {
	at time.Duration
	up bool
}

func newRunView(run *results.Run, recs []traffic.Record) *runView {
	v := &runView{run: run, origin: run.Origin(), flows: results.Flows(recs),
		subflows: map[string][]results.SubflowSeries{}, received: map[string][]traffic.Record{}}
	for _, s := range results.Subflows(recs) {
		v.subflows[s.Key.Flow] = append(v.subflows[s.Key.Flow], s)
	}
	for _, r := range recs {
		if r.Kind == traffic.KindReceiver {
			v.received[r.Flow] = append(v.received[r.Flow], r)
		}
	}
	for k := range v.received {
		slices.SortStableFunc(v.received[k], func(a, b traffic.Record) int { return a.Time.Compare(b.Time) })
	}
	for _, e := range run.Events {
		if e.AppliedAfter > 0 && e.Error == "" {
			v.events = append(v.events, event{at: e.AppliedAfter, up: e.Action == "up"})
		}
	}
	slices.SortStableFunc(v.events, func(a, b event) int { return int(a.at - b.at) })
	return v
}

// since is t as a time since the run's origin.
func (v *runView) since(t time.Time) time.Duration { return t.Sub(v.origin) }

// span is the part of the flow's time a window covers, false when the
// run has no events to place it by.
func (v *runView) span(f *results.Flow, w Window) (from, to time.Duration, ok bool) {
	start, end := v.flowSpan(f)
	from, to = start, end
	switch w.Name {
	case "":
	case WindowBefore:
		if len(v.events) == 0 {
			return 0, 0, false
		}
		to = v.events[0].at
	case WindowDuring:
		up := slices.IndexFunc(v.events, func(e event) bool { return e.up })
		switch {
		case len(v.events) == 0 || up == 0:
			return 0, 0, false
		case up < 0:
			from = v.events[len(v.events)-1].at
		default:
			from, to = v.events[up-1].at, v.events[up].at
		}
	case WindowAfter:
		if len(v.events) == 0 {
			return 0, 0, false
		}
		from = v.events[len(v.events)-1].at + settle
	default:
		from, to = w.From, w.To
	}
	from, to = max(from, start), min(to, end)
	return from, to, to-from >= minSpan
}

// minSpan is the shortest window a rate is taken over: two samples.
const minSpan = 200 * time.Millisecond

// flowSpan is when the flow started (the earlier of its ends) and its
// receiver's last sample, since the origin.
func (v *runView) flowSpan(f *results.Flow) (start, end time.Duration) {
	s := f.Client.Start
	if !f.Receiver.Start.IsZero() && f.Receiver.Start.Before(s) {
		s = f.Receiver.Start
	}
	start = v.since(s)
	end = start + f.Client.Completion
	if rs := v.received[f.ID]; len(rs) > 0 {
		end = max(end, v.since(rs[len(rs)-1].Time))
	}
	return start, end
}

// bytesAt is the receiver's byte count at t since the origin, linear
// between its samples, 0 at the flow's start.
func (v *runView) bytesAt(f *results.Flow, t time.Duration) float64 {
	start, _ := v.flowSpan(f)
	prevT, prevB := start, 0.0
	for _, r := range v.received[f.ID] {
		rt, rb := v.since(r.Time), float64(r.BytesReceived)
		if rt >= t {
			if rt == prevT {
				return rb
			}
			return prevB + (rb-prevB)*float64(t-prevT)/float64(rt-prevT)
		}
		prevT, prevB = rt, rb
	}
	return prevB
}

// rateOver is the receiver's goodput between two times, in bit/s.
func (v *runView) rateOver(f *results.Flow, from, to time.Duration) float64 {
	return (v.bytesAt(f, to) - v.bytesAt(f, from)) * 8 / (to - from).Seconds()
}

func goodput(v *runView, f *results.Flow, w Window) (float64, bool) {
	if w.IsZero() {
		g := f.Goodput()
		return g / 1e6, g > 0
	}
	from, to, ok := v.span(f, w)
	if !ok || len(v.received[f.ID]) == 0 {
		return 0, false
	}
	return v.rateOver(f, from, to) / 1e6, true
}

// jitter pools the receiver's per-sample gap statistics over the
// window: each sample's units, their mean gap (its interval over its
// units) and their standard deviation.
func jitter(v *runView, f *results.Flow, w Window) (float64, bool) {
	if w.IsZero() {
		return ms(f.Receiver.Jitter), f.Receiver.Kind != 0
	}
	from, to, ok := v.span(f, w)
	if !ok {
		return 0, false
	}
	var n, sum, sumSq float64
	for _, r := range v.received[f.ID] {
		t := v.since(r.Time)
		if t <= from || t > to || r.Units == 0 {
			continue
		}
		k := float64(r.Units)
		mean := float64(r.Interval) / k
		sd := float64(r.Jitter)
		n += k
		sum += k * mean
		sumSq += k * (sd*sd + mean*mean)
	}
	if n < 2 {
		return 0, false
	}
	mean := sum / n
	return math.Sqrt(max(0, sumSq/n-mean*mean)) / 1e6, true
}

// last is a subflow's last sample.
func last(s results.SubflowSeries) traffic.Record { return s.Samples[len(s.Samples)-1] }

func loss(v *runView, f *results.Flow, _ Window) (float64, bool) {
	var sum float64
	n := 0
	for _, s := range v.subflows[f.ID] {
		if r := last(s); r.BytesSent > 0 {
			sum += float64(r.BytesRetrans) / float64(r.BytesSent)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func rtos(v *runView, f *results.Flow, _ Window) (float64, bool) {
	ss := v.subflows[f.ID]
	sum := 0
	for _, s := range ss {
		sum += int(last(s).RTOs)
	}
	return float64(sum), len(ss) > 0
}

// highRTTFactor: a subflow whose median RTT is above this many times
// the fastest subflow's is on a high-RTT path ([LISP-TE]'s fourth ELP,
// 307 ms against 115-120).
const highRTTFactor = 1.5

func highRTTShare(v *runView, f *results.Flow, _ Window) (float64, bool) {
	ss := v.subflows[f.ID]
	fastest := time.Duration(0)
	for _, s := range ss {
		if rtt, ok := s.MedianRTT(); ok && (fastest == 0 || rtt < fastest) {
			fastest = rtt
		}
	}
	var total, high float64
	for _, s := range ss {
		b := float64(last(s).BytesAcked)
		total += b
		if rtt, ok := s.MedianRTT(); ok && float64(rtt) > highRTTFactor*float64(fastest) {
			high += b
		}
	}
	if total == 0 {
		return 0, false
	}
	return high / total, true
}

// windowRatio is the goodput over one window over the goodput over
// another, of the same flow in the same run.
func windowRatio(num, den string) func(*runView, *results.Flow, Window) (float64, bool) {
	return func(v *runView, f *results.Flow, _ Window) (float64, bool) {
		a, ok1 := goodput(v, f, Window{Name: num})
		b, ok2 := goodput(v, f, Window{Name: den})
		if !ok1 || !ok2 || b <= 0 {
			return 0, false
		}
		return a / b, true
	}
}

// reactionWindow is the span over which reaction reads the goodput.
const reactionWindow = 200 * time.Millisecond

// reaction is the time from the first event to the start of the first
// 200 ms (from then on) whose goodput reaches 90 % of what the path left
// carries: the mean over the second half of the failure when it lasts 2
// s or more, else the goodput before it (a short outage leaves the whole
// path). A flow that never gets there counts the time to its end.
func reaction(v *runView, f *results.Flow, _ Window) (float64, bool) {
	if len(v.events) == 0 {
		return 0, false
	}
	fail := v.events[0].at
	before, ok := goodput(v, f, Window{Name: WindowBefore})
	if !ok {
		return 0, false
	}
	target := before
	if from, to, ok := v.span(f, Window{Name: WindowDuring}); ok && to-from >= 2*time.Second {
		target = v.rateOver(f, (from+to)/2, to) / 1e6
	}
	target *= 0.9
	_, end := v.flowSpan(f)
	for t := fail; t+reactionWindow <= end; t += reactionWindow / 4 {
		if v.rateOver(f, t, t+reactionWindow)/1e6 >= target {
			return (t - fail).Seconds(), true
		}
	}
	return (end - fail).Seconds(), true
}

// carrying counts the flow's subflows whose acknowledged bytes grew in
// the 200 ms up to t.
func (v *runView) carrying(f *results.Flow, t time.Duration) int {
	n := 0
	for _, s := range v.subflows[f.ID] {
		var at, before *traffic.Record
		for i := range s.Samples {
			st := v.since(s.Samples[i].Time)
			if st <= t-reactionWindow {
				before = &s.Samples[i]
			}
			if st <= t {
				at = &s.Samples[i]
			}
		}
		if at != nil && before != nil && at.BytesAcked > before.BytesAcked {
			n++
		}
	}
	return n
}

// repair is the time from the last event until as many subflows carry
// data (acknowledgements within 200 ms) as did just before the first;
// a flow that never gets there counts the time to its end.
func repair(v *runView, f *results.Flow, _ Window) (float64, bool) {
	if len(v.events) == 0 || len(v.subflows[f.ID]) == 0 {
		return 0, false
	}
	want := v.carrying(f, v.events[0].at)
	if want == 0 {
		return 0, false
	}
	restore := v.events[len(v.events)-1].at
	_, end := v.flowSpan(f)
	for t := restore + reactionWindow/4; t <= end; t += reactionWindow / 4 {
		if v.carrying(f, t) >= want {
			return (t - restore).Seconds(), true
		}
	}
	return (end - restore).Seconds(), true
}
