package lab

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// The files of a scenario's results directory (docs/lab.md, "Results").
const (
	MetaFile    = "meta.json"
	RunsFile    = "runs.jsonl"
	RecordsFile = "records.jsonl"
)

// Meta describes an experiment: meta.json.
type Meta struct {
	Scenario     string `json:"scenario"`      // the scenario's name
	ScenarioFile string `json:"scenario_file"` // its path
	// ScenarioSource and TopologySource are the files' contents.
	ScenarioSource string       `json:"scenario_source"`
	TopologyFile   string       `json:"topology_file"`
	TopologySource string       `json:"topology_source"`
	Kernel         string       `json:"kernel"` // uname: sysname release version machine
	CPUs           int          `json:"cpus"`
	GoVersion      string       `json:"go_version"`
	Version        string       `json:"version"` // amptcp's
	Started        time.Time    `json:"started"`
	Settings       MetaSettings `json:"settings"`
}

// MetaSettings are the runner's settings.
type MetaSettings struct {
	// Dimensions are the matrix's, in its order, with their values.
	Dimensions  []MetaDimension `json:"dimensions"`
	Repetitions int             `json:"repetitions"`
	Runs        int             `json:"runs"`
	// Timeout bounds each run's flows.
	Timeout time.Duration `json:"timeout_ns"`
	// Events says whether the runner applies timeline events.
	Events string `json:"events"`
}

// MetaDimension is a dimension of the matrix.
type MetaDimension struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// RunEntry is one run: a line of runs.jsonl.
type RunEntry struct {
	Run        string            `json:"run"`
	Index      int               `json:"index"`
	Repetition int               `json:"repetition"`
	Variant    map[string]string `json:"variant"`
	Started    time.Time         `json:"started"`
	Ended      time.Time         `json:"ended"`
	// FlowsStart is when the flows' clock started: the origin of the
	// events' and the flows' times.
	FlowsStart time.Time `json:"flows_start,omitzero"`
	// Error is why the run failed (the lab did not come up, a flow
	// failed, it was interrupted); empty for a good run.
	Error string `json:"error,omitempty"`
	// Events are the timeline events of the run, with when they were
	// really applied; EventsNote says why they were not, if they were not.
	Events     []AppliedEvent `json:"events"`
	EventsNote string         `json:"events_note,omitempty"`
	// Fidelity is null until the emulator's fidelity is measured before
	// each run (docs/lab.md, "Not there yet").
	Fidelity json.RawMessage `json:"fidelity"`
}

// AppliedEvent is a timeline event of a run.
type AppliedEvent struct {
	// At is its time in the timeline, AppliedAfter when it was applied,
	// both from FlowsStart, and Applied the same as a time; both are
	// zero (absent) for an event that was not applied (the flows ended
	// before, or no link control).
	At           time.Duration `json:"at_ns"`
	AppliedAfter time.Duration `json:"applied_ns,omitempty"`
	Applied      time.Time     `json:"applied,omitzero"`
	Link         string        `json:"link"`
	Action       string        `json:"action"`
	Error        string        `json:"error,omitempty"`
}

// RunRecord is a lab/traffic record of a run: a line of records.jsonl,
// the record's JSON with the run's ID first.
type RunRecord struct {
	Run string `json:"run"`
	traffic.Record
}

// recordWriter writes each record of a run as a RunRecord line; it is a
// traffic.Recorder.
type recordWriter struct {
	mu  sync.Mutex
	run string
	w   *bufio.Writer
	err error
}

func (w *recordWriter) Record(r traffic.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	b, err := json.Marshal(RunRecord{Run: w.run, Record: r})
	if err == nil {
		_, err = w.w.Write(append(b, '\n'))
	}
	if err != nil {
		w.err = fmt.Errorf("write record of flow %q: %w", r.Flow, err)
	}
}

// startRun makes the following records the run's.
func (w *recordWriter) startRun(id string) {
	w.mu.Lock()
	w.run = id
	w.mu.Unlock()
}

func (w *recordWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// ReadRuns reads runs.jsonl.
func ReadRuns(r io.Reader) ([]RunEntry, error) { return readLines[RunEntry](r, RunsFile) }

// ReadRunRecords reads records.jsonl.
func ReadRunRecords(r io.Reader) ([]RunRecord, error) {
	return readLines[RunRecord](r, RecordsFile)
}

// ReadMeta reads a results directory's meta.json.
func ReadMeta(dir string) (*Meta, error) {
	b, err := os.ReadFile(dir + "/" + MetaFile)
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", MetaFile, err)
	}
	return &m, nil
}

// readLines decodes JSON lines strictly: an unknown key is an error, so
// that another program's file is not misread.
func readLines[T any](r io.Reader, what string) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return out, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}
