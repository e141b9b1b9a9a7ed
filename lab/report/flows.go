package report

import (
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// runGoodput is a run's stream goodput in bit/s: the sum of its
// saturated flows' goodputs if it has any that succeeded, else the bytes
// its transfers delivered over the span from the first start to the last
// end (which includes any pauses between them). An iperf3 flow, a
// cross-check of the others, is not counted.
func runGoodput(flows []results.Flow) float64 {
	var first, last time.Time
	var bytes uint64
	saturated := 0.0
	for _, f := range flows {
		if f.Error != "" {
			continue
		}
		switch f.Kind {
		case traffic.Saturate:
			saturated += f.Goodput()
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
