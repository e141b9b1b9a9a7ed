package lab

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/amptcp/amptcp/internal/jsonl"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// linkSampleInterval is how often the emulated links' counters are
// sampled while a run's flows run (every 100 ms, as the flows'
// own samples).
const linkSampleInterval = 100 * time.Millisecond

// startLinkSampling samples the emulated links of a run's lab into
// opts' links.jsonl until the function it returns is called, which
// notes in e why samples are missing, if they are. A lab without
// emulated links has nothing to sample.
func startLinkSampling(plan *topo.Plan, opts RunOptions, e *results.Run) (stop func()) {
	if opts.linkSamples == nil {
		return func() {}
	}
	links, err := OpenLinks(plan.Name, opts.Lab)
	if errors.Is(err, ErrNoEmulatedLinks) {
		return func() {}
	}
	if err != nil {
		e.LinksError = err.Error()
		return func() {}
	}
	done, sampled := make(chan struct{}), make(chan error, 1)
	lo, _ := opts.observer().(LinkObserver)
	go func() { sampled <- sampleLinks(links, e.ID, opts.linkSamples, lo, done) }()
	return func() {
		close(done)
		if err := <-sampled; err != nil {
			e.LinksError = err.Error()
		}
	}
}

// sampleLinks writes the counters of every emulated link direction every
// linkSampleInterval until stop is closed, and once more then, so that
// the last interval is in the samples too. A failed read leaves a gap;
// the first error is returned.
func sampleLinks(links LinkControl, run string, w *jsonl.Writer, obs LinkObserver, stop <-chan struct{}) error {
	tick := time.NewTicker(linkSampleInterval)
	defer tick.Stop()
	var firstErr error
	sample := func() {
		stats, err := links.Stats()
		now := time.Now()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		var round []results.LinkSample
		for _, name := range slices.Sorted(maps.Keys(stats)) {
			st := stats[name]
			for _, d := range []linkemu.Direction{linkemu.AToB, linkemu.BToA} {
				ds := st.Dir(d)
				ls := results.LinkSample{Run: run, Time: now, Link: name, Direction: d.String(),
					FramesIn: ds.FramesIn, BytesIn: ds.BytesIn, Delivered: ds.Delivered, DeliveredBytes: ds.DeliveredBytes,
					DroppedLoss: ds.DroppedLoss, DroppedQueue: ds.DroppedQueue, DroppedDown: ds.DroppedDown}
				w.Write(ls, func() string { return "sample of link " + name })
				round = append(round, ls)
			}
		}
		if obs != nil {
			obs.LinksSampled(round)
		}
	}
	sample()
	for {
		select {
		case <-tick.C:
			sample()
		case <-stop:
			sample()
			return firstErr
		}
	}
}
