package results

import (
	"slices"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// Flow is one flow of one run as both of its ends reported it.
type Flow struct {
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

// Flows gathers the result records of a run by flow, in the order of
// their first result.
func Flows(recs []traffic.Record) []Flow {
	var out []Flow
	index := map[string]int{}
	for _, r := range recs {
		if r.Kind != traffic.KindResult {
			continue
		}
		i, ok := index[r.Flow]
		if !ok {
			i = len(out)
			index[r.Flow] = i
			out = append(out, Flow{ID: r.Flow, Kind: r.FlowKind, Client: r})
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

// Goodput is the flow's goodput in bit/s at its receiver (at its sender
// if the receiver did not report), over the receiver's completion time.
func (f *Flow) Goodput() float64 {
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

// SubflowKey names one subflow of one flow.
type SubflowKey struct {
	Flow    string
	Subflow uint8
}

// SubflowSeries is the sender's samples of one subflow, in time order.
type SubflowSeries struct {
	Key     SubflowKey
	Local   string
	Remote  string
	Samples []traffic.Record
}

// Subflows groups a run's subflow records by flow and subflow, in the
// order each first appears.
func Subflows(recs []traffic.Record) []SubflowSeries {
	var out []SubflowSeries
	index := map[SubflowKey]int{}
	for _, r := range recs {
		if r.Kind != traffic.KindSubflow {
			continue
		}
		k := SubflowKey{r.Flow, r.Subflow}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, SubflowSeries{Key: k})
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

// MedianRTT is the median of the subflow's smoothed RTTs, false when no
// sample had one.
func (s *SubflowSeries) MedianRTT() (time.Duration, bool) {
	var rtts []time.Duration
	for _, r := range s.Samples {
		if r.RTT > 0 {
			rtts = append(rtts, r.RTT)
		}
	}
	if len(rtts) == 0 {
		return 0, false
	}
	slices.Sort(rtts)
	n := len(rtts)
	if n%2 == 1 {
		return rtts[n/2], true
	}
	return (rtts[n/2-1] + rtts[n/2]) / 2, true
}

// RTTSpread is the difference between the largest and the smallest of
// the subflows' median smoothed RTTs, and whether any subflow had an RTT.
func RTTSpread(series []SubflowSeries) (time.Duration, bool) {
	var medians []time.Duration
	for i := range series {
		if m, ok := series[i].MedianRTT(); ok {
			medians = append(medians, m)
		}
	}
	if len(medians) == 0 {
		return 0, false
	}
	return slices.Max(medians) - slices.Min(medians), true
}

// Throughput is a subflow's rate in bit/s between consecutive samples,
// from its acknowledged bytes, at the seconds since origin of each
// sample's end.
func (s *SubflowSeries) Throughput(origin time.Time) (xs, ys []float64) {
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
