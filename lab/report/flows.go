package report

import (
	"slices"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// flowOutcome is one flow of one run as both of its ends reported it.
type flowOutcome struct {
	ID   string
	Kind traffic.Kind
	// Client is the result of the end that started first (the client
	// starts to dial before the server accepts): its completion time is
	// the one a user sees, handshake included.
	Client traffic.Record
	// Receiver is the receiving end's result, for goodput and jitter; it
	// is the zero Record when only the sender reported.
	Receiver traffic.Record
	// Bytes is the most payload either end counted.
	Bytes uint64
	// Error is the first end's error, if any end failed.
	Error string
}

// flowOutcomes gathers the result records of a run by flow, in the order
// of their first result.
func flowOutcomes(recs []traffic.Record) []flowOutcome {
	var out []flowOutcome
	index := map[string]int{}
	for _, r := range recs {
		if r.Kind != traffic.KindResult {
			continue
		}
		i, ok := index[r.Flow]
		if !ok {
			i = len(out)
			index[r.Flow] = i
			out = append(out, flowOutcome{ID: r.Flow, Kind: r.FlowKind, Client: r})
		}
		f := &out[i]
		if r.Start.Before(f.Client.Start) {
			f.Client = r
		}
		if r.Role == traffic.Receiver {
			f.Receiver = r
		}
		f.Bytes = max(f.Bytes, r.BytesSent, r.BytesReceived)
		if f.Error == "" {
			f.Error = r.Error
		}
	}
	return out
}

// goodput is the flow's goodput in bit/s at its receiver (at its sender
// if the receiver did not report), over the receiver's completion time.
func (f *flowOutcome) goodput() float64 {
	r := f.Receiver
	bytes := r.BytesReceived
	if r.Kind == 0 {
		r, bytes = f.Client, f.Client.BytesSent
	}
	if r.Completion <= 0 {
		return 0
	}
	return float64(bytes) * 8 / r.Completion.Seconds()
}

// runGoodput is a run's stream goodput in bit/s: the sum of its
// saturated flows' goodputs if it has any that succeeded, else the bytes
// its transfers delivered over the span from the first start to the last
// end (which includes any pauses between them). An iperf3 flow, a
// cross-check of the others, is not counted.
func runGoodput(flows []flowOutcome) float64 {
	var first, last time.Time
	var bytes uint64
	saturated := 0.0
	for _, f := range flows {
		if f.Error != "" {
			continue
		}
		switch f.Kind {
		case traffic.Saturate:
			saturated += f.goodput()
		case traffic.Transfer:
			start, end := f.Client.Start, f.Client.Start.Add(f.Client.Completion)
			if first.IsZero() || start.Before(first) {
				first = start
			}
			if end.After(last) {
				last = end
			}
			bytes += f.Bytes
		}
	}
	if saturated > 0 {
		return saturated
	}
	if !last.After(first) {
		return 0
	}
	return float64(bytes) * 8 / last.Sub(first).Seconds()
}

// subflowKey names one subflow of one flow.
type subflowKey struct {
	Flow    string
	Subflow uint8
}

// subflowSeries is the sender's samples of one subflow, in time order.
type subflowSeries struct {
	Key     subflowKey
	Local   string
	Remote  string
	Samples []traffic.Record
}

// subflows groups a run's subflow records by flow and subflow, in the
// order each first appears.
func subflows(recs []traffic.Record) []subflowSeries {
	var out []subflowSeries
	index := map[subflowKey]int{}
	for _, r := range recs {
		if r.Kind != traffic.KindSubflow {
			continue
		}
		k := subflowKey{r.Flow, r.Subflow}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, subflowSeries{Key: k})
		}
		s := &out[i]
		if r.Local.IsValid() {
			s.Local, s.Remote = r.Local.String(), r.Remote.String()
		}
		s.Samples = append(s.Samples, r)
	}
	for i := range out {
		slices.SortStableFunc(out[i].Samples, func(a, b traffic.Record) int { return a.Time.Compare(b.Time) })
	}
	return out
}

// rttSpread is the difference between the largest and the smallest of
// the subflows' median smoothed RTTs, and whether any subflow had an RTT.
func rttSpread(series []subflowSeries) (time.Duration, bool) {
	var medians []float64
	for _, s := range series {
		var rtts []float64
		for _, r := range s.Samples {
			if r.RTT > 0 {
				rtts = append(rtts, float64(r.RTT))
			}
		}
		if len(rtts) > 0 {
			medians = append(medians, Describe(rtts).Median)
		}
	}
	if len(medians) == 0 {
		return 0, false
	}
	return time.Duration(slices.Max(medians) - slices.Min(medians)), true
}

// throughput is a subflow's rate in bit/s between consecutive samples,
// from its acknowledged bytes, at the seconds since origin of each
// sample's end.
func (s *subflowSeries) throughput(origin time.Time) (xs, ys []float64) {
	for i := 1; i < len(s.Samples); i++ {
		a, b := s.Samples[i-1], s.Samples[i]
		dt := b.Time.Sub(a.Time).Seconds()
		if dt <= 0 || b.BytesAcked < a.BytesAcked {
			continue
		}
		xs = append(xs, b.Time.Sub(origin).Seconds())
		ys = append(ys, float64(b.BytesAcked-a.BytesAcked)*8/dt)
	}
	return xs, ys
}
