package lab

import (
	"time"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// Observer watches a scenario's runs as they happen: the live view
// (lab/live) is one. RunScenario calls it from its own goroutine and
// Record from every flow's, so it must be safe for concurrent use; and
// it must not block, since the runs wait for it.
type Observer interface {
	// Record gets every record of the run under way, as records.jsonl
	// does.
	traffic.Recorder
	// RunStarted is called as a run starts, before its lab comes up;
	// total is the number of runs of the scenario.
	RunStarted(run scenario.Run, total int)
	// FlowsStarted is called when the run's flows' clock starts: the
	// origin of the timeline's and the flows' times.
	FlowsStarted(at time.Time)
	// EventApplied is called with each timeline event once it was
	// applied (Applied and AppliedAfter set, Error if it failed).
	EventApplied(ev results.Event)
	// RunEnded is called with the run as runs.jsonl gets it: its error,
	// events and fidelity.
	RunEnded(run results.Run)
}

// The optional parts of an Observer: the runner calls those it has.

// ClaimsObserver is an Observer that shows the scenario's claims: after
// each run, it gets them as the runs so far measure them.
type ClaimsObserver interface {
	ClaimsEvaluated(results []claims.Result)
}

// TopologyObserver gets the topology of each run (the variant's), before
// its lab comes up.
type TopologyObserver interface {
	TopologyStarted(t *topo.Topology)
}

// LinkObserver gets the emulated links' counters every time the runner
// samples them (every 100 ms while the flows run), as links.jsonl does.
type LinkObserver interface {
	LinksSampled(samples []results.LinkSample)
}

// ControlObserver may change the run's links while its flows run: once
// they start it gets apply, which applies an event at once and records
// it in the run's events (marked manual), and nil once they end.
type ControlObserver interface {
	ControlAvailable(apply func(ev topo.Event) error)
}

// observer is opts.Observer, or one that ignores everything.
func (opts RunOptions) observer() Observer {
	if opts.Observer == nil {
		return noObserver{}
	}
	return opts.Observer
}

type noObserver struct{}

func (noObserver) Record(traffic.Record)        {}
func (noObserver) RunStarted(scenario.Run, int) {}
func (noObserver) FlowsStarted(time.Time)       {}
func (noObserver) EventApplied(results.Event)   {}
func (noObserver) RunEnded(results.Run)         {}

// teeRecorder gives each record to the results file, to the observer
// and, for the claims, to the run's collector (nil: none).
type teeRecorder struct {
	file *recordWriter
	obs  Observer
	run  *traffic.Collector
}

func (t teeRecorder) Record(r traffic.Record) {
	t.file.Record(r)
	t.obs.Record(r)
	if t.run != nil {
		t.run.Record(r)
	}
}
