// Package results is the format of an experiment's results directory
// (docs/lab.md, "Results"): what `amptcp lab run` writes and `amptcp lab
// report` reads, in one place so that the two cannot drift apart.
//
//	meta.json      Meta: the scenario, the machine, the program, the settings
//	runs.jsonl     one Run a line, in the order they ran
//	records.jsonl  one Record a line: a lab/traffic record with its run's ID
package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// The files of a results directory.
const (
	MetaFile    = "meta.json"
	RunsFile    = "runs.jsonl"
	RecordsFile = "records.jsonl"
	// LinksFile is absent from the results of labs without emulated
	// links, and of runners older than it.
	LinksFile = "links.jsonl"
)

// Meta describes an experiment as a whole: meta.json.
type Meta struct {
	Scenario     string `json:"scenario"`      // the scenario's name
	ScenarioFile string `json:"scenario_file"` // its path
	// ScenarioSource and TopologySource are the files' contents.
	ScenarioSource string    `json:"scenario_source"`
	TopologyFile   string    `json:"topology_file"`
	TopologySource string    `json:"topology_source"`
	Kernel         string    `json:"kernel"` // uname: sysname release version machine
	CPUs           int       `json:"cpus"`
	GoVersion      string    `json:"go_version"`
	Version        string    `json:"version"` // amptcp's
	Started        time.Time `json:"started"`
	Settings       Settings  `json:"settings"`
	// Short says that the scenario's short version ran.
	Short bool `json:"short,omitempty"`
	// Calibration is what the calibration phase found, before the runs.
	Calibration []Calibration `json:"calibration,omitempty"`
}

// Calibration is a link parameter fitted before the runs so that a
// single-path TCP flow reaches the paper's goodput.
type Calibration struct {
	Link      string `json:"link"`
	Direction string `json:"direction,omitempty"`
	Param     string `json:"param"` // loss or rate
	// Target is the paper's goodput (bit/s), Figure where it says so,
	// Tolerance the share the mean may miss it by.
	Target    float64 `json:"target_bps"`
	Figure    string  `json:"figure"`
	Tolerance float64 `json:"tolerance"`
	// Steps are the values tried, in order; Value the one the runs use
	// (the last within the tolerance, else the nearest), Met whether it
	// was within.
	Steps []CalibrationStep `json:"steps"`
	Value float64           `json:"value"`
	Met   bool              `json:"met"`
	Error string            `json:"error,omitempty"`
}

// String says what a calibration found: "loss 0.00123 gives 1.58
// Mbit/s, within 15 % of the target 1.6 Mbit/s (Fig. 5a), after 4 steps".
func (c Calibration) String() string {
	if c.Error != "" {
		return "failed: " + c.Error
	}
	if len(c.Steps) == 0 {
		return "no step"
	}
	st := c.Steps[len(c.Steps)-1]
	for _, s := range c.Steps {
		if s.Value == c.Value {
			st = s
		}
	}
	met := "within"
	if !c.Met {
		met = "NOT within"
	}
	value := fmt.Sprintf("rate %.3g Mbit/s", c.Value/1e6)
	if c.Param == "loss" {
		value = "loss " + strconv.FormatFloat(c.Value, 'g', 3, 64)
	}
	return fmt.Sprintf("%s gives %.3g Mbit/s, %s %.0f %% of the target %.3g Mbit/s (%s), after %d steps",
		value, st.Mean/1e6, met, 100*c.Tolerance, c.Target/1e6, c.Figure, len(c.Steps))
}

// CalibrationStep is one value tried: the goodput of each flow at it.
type CalibrationStep struct {
	Value   float64   `json:"value"`
	Goodput []float64 `json:"goodput_bps"`
	Mean    float64   `json:"mean_bps"`
}

// Settings are the runner's.
type Settings struct {
	// Dimensions are the matrix's, in its order, with their values.
	Dimensions  []Dimension `json:"dimensions"`
	Repetitions int         `json:"repetitions"`
	Runs        int         `json:"runs"`
	// Timeout bounds each run's flows.
	Timeout time.Duration `json:"timeout_ns"`
	// Events says whether and how the runner applies timeline events.
	Events string `json:"events"`
}

// Dimension is a dimension of the scenario's matrix.
type Dimension struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// Variant is one cell of the matrix: a value for each dimension (pm, cc,
// failure, ...).
type Variant map[string]string

// variantOrder is the order of the well-known dimensions in a variant's
// name; the others follow sorted.
var variantOrder = []string{"pm", "cc", "failure"}

// Name is the variant's values joined by "/", the well-known dimensions
// (pm, cc, failure) first, then the others by the dimension's name.
func (v Variant) Name() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i := slices.Index(variantOrder, k); i >= 0 {
			return i
		}
		return len(variantOrder)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = v[k]
	}
	return strings.Join(vals, "/")
}

// Run is one run, a variant's repetition: a line of runs.jsonl.
type Run struct {
	ID         string    `json:"run"`
	Index      int       `json:"index"`
	Repetition int       `json:"repetition"`
	Variant    Variant   `json:"variant"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
	// FlowsStart is when the flows' clock started: the origin of the
	// events' and the flows' times.
	FlowsStart time.Time `json:"flows_start,omitzero"`
	// Error is why the run failed (the lab did not come up, a flow
	// failed, it was interrupted); empty for a good run. A report leaves
	// a failed run's records out of its statistics.
	Error string `json:"error,omitempty"`
	// Skipped says why the run was not run: its variant needs what the
	// machine lacks (a congestion control, an MPTCP scheduler, a router
	// feature). It has no records, and is no failure.
	Skipped string `json:"skipped,omitempty"`
	// Events are the timeline events of the run, with when they were
	// really applied; EventsNote says why they were not, if they were not.
	Events     []Event `json:"events"`
	EventsNote string  `json:"events_note,omitempty"`
	// LinksError is why links.jsonl misses samples of the run, if it does.
	LinksError string `json:"links_error,omitempty"`
	// Fidelity is how well the emulation met its configuration
	// (docs/lab.md, "Fidelity"); nil when it was not measured: the lab
	// has no emulated link, or the scenario says fidelity: false.
	Fidelity *Fidelity `json:"fidelity"`
	// MPTCPCounters are, per host, the kernel's MPTCP counters
	// (/proc/net/netstat's MPTcpExt) that are not zero at the end of the
	// flows: they say why a connection fell back to TCP, if one did.
	MPTCPCounters map[string]map[string]uint64 `json:"mptcp_counters,omitempty"`
}

// Origin is the time the run's timeline counts from: when its flows
// started, else when the run did.
func (r *Run) Origin() time.Time {
	if !r.FlowsStart.IsZero() {
		return r.FlowsStart
	}
	return r.Started
}

// Flagged says whether the run's fidelity was measured and missed.
func (r *Run) Flagged() bool { return r.Fidelity != nil && !r.Fidelity.OK }

// Event is a timeline event of a run.
type Event struct {
	// At is its time in the timeline, AppliedAfter when it was applied,
	// both from the run's FlowsStart, and Applied the same as a time;
	// both are zero (absent) for an event that was not applied (the flows
	// ended before, or the lab has no link control).
	At           time.Duration `json:"at_ns"`
	AppliedAfter time.Duration `json:"applied_ns,omitempty"`
	Applied      time.Time     `json:"applied,omitzero"`
	Link         string        `json:"link"`
	Action       string        `json:"action"`
	// Detail says what a set changed ("delay 30ms, loss 1%") and which
	// end went down or up ("end a").
	Detail string `json:"detail,omitempty"`
	// Manual marks an event applied by hand during the run (the live
	// view's controls), not from the scenario.
	Manual bool   `json:"manual,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Label is the event as a plot's legend shows it: "l2 down", "l2 set
// delay 30ms".
func (e Event) Label() string { return strings.TrimSpace(e.Link + " " + e.Action + " " + e.Detail) }

// Fidelity is how well the emulator met its configuration in a run.
type Fidelity struct {
	OK          bool           `json:"ok"`
	Paths       []PathFidelity `json:"paths"`
	LatenessP99 time.Duration  `json:"lateness_p99_ns"`
	// Error is why the measurement could not be made (or finished);
	// such a run is not OK.
	Error string `json:"error,omitempty"`
}

// PathFidelity is the measurement of one emulated path before a run
// against its configuration.
type PathFidelity struct {
	Name    string        `json:"name"`
	RTTWant time.Duration `json:"rtt_want_ns"`
	RTT     time.Duration `json:"rtt_ns"`
	// RTTBase is the RTT measured with the path's delays set to zero.
	RTTBase time.Duration `json:"rtt_base_ns"`
	// RateWant is the payload rate the data's bottleneck link should
	// deliver, Rate what it delivered while a single TCP flow filled it,
	// and Goodput what that flow's receiver got (recorded, not judged:
	// TCP's in-order delivery stalls and bursts at each loss).
	RateWant float64 `json:"rate_want_bps"`
	Rate     float64 `json:"rate_bps"`
	Goodput  float64 `json:"goodput_bps,omitempty"`
	// RateNote says why the rate was not judged (a lossy path, a queue
	// below the bandwidth-delay product), if it was not.
	RateNote string `json:"rate_note,omitempty"`
	OK       bool   `json:"ok"`
}

// String says what was measured against what: "c>s via p1 a-to-b,
// p1 b-to-a: RTT 41.9ms of 40.6ms configured (1.3ms without the delays),
// 3.80 of 3.76 Mbit/s".
func (p PathFidelity) String() string {
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	s := fmt.Sprintf("%s: RTT %v of %v configured (%v without the delays), %.2f of %.2f Mbit/s",
		p.Name, us(p.RTT), us(p.RTTWant), us(p.RTTBase), p.Rate/1e6, p.RateWant/1e6)
	if p.RateNote != "" {
		s += " (" + p.RateNote + ")"
	}
	return s
}

// NotConnected starts the error of a flow's result when its client did
// not connect within the flow's connect-timeout: an outcome measured (the
// claims' connected metric), not a failure of the run.
const NotConnected = "not connected"

// Record is a lab/traffic record of a run: a line of records.jsonl, the
// record's JSON with the run's ID first.
type Record struct {
	Run string `json:"run"`
	traffic.Record
}

// LinkSample is an emulated link direction's counters at a time of a
// run, from the start of its lab: a line of links.jsonl, written every
// 100 ms while the run's flows run.
type LinkSample struct {
	Run       string    `json:"run"`
	Time      time.Time `json:"time"`
	Link      string    `json:"link"`
	Direction string    `json:"direction"` // a-to-b or b-to-a
	// What entered the link, what it delivered, and what it dropped:
	// by its loss model, because its queue was full, or while it was down.
	FramesIn       uint64 `json:"frames_in"`
	BytesIn        uint64 `json:"bytes_in"`
	Delivered      uint64 `json:"delivered"`
	DeliveredBytes uint64 `json:"delivered_bytes"`
	DroppedLoss    uint64 `json:"dropped_loss"`
	DroppedQueue   uint64 `json:"dropped_queue"`
	DroppedDown    uint64 `json:"dropped_down"`
}

// Results is a loaded results directory.
type Results struct {
	Dir  string
	Meta Meta
	// Runs in the order of runs.jsonl (the order they ran in).
	Runs []*Run
	// Records of each run by its ID, in the order of records.jsonl.
	Records map[string][]traffic.Record
	// Links are the link samples of each run by its ID, in the order of
	// links.jsonl (none without the file).
	Links map[string][]LinkSample
}

// Run returns the run with the given ID, or nil.
func (r *Results) Run(id string) *Run {
	for _, run := range r.Runs {
		if run.ID == id {
			return run
		}
	}
	return nil
}

// LoadError says which file, and which line of it (0: the whole file),
// could not be read.
type LoadError struct {
	File string
	Line int
	Err  error
}

func (e *LoadError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("results: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("results: %s line %d: %v", e.File, e.Line, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load reads the results directory dir. meta.json and runs.jsonl may
// carry keys this package does not know (a newer runner may add some);
// records.jsonl may not, as traffic.ReadRecords. Every error is a
// *LoadError.
func Load(dir string) (*Results, error) {
	res := &Results{Dir: dir, Records: map[string][]traffic.Record{}, Links: map[string][]LinkSample{}}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, &LoadError{File: MetaFile, Err: err}
	}
	if err := json.Unmarshal(b, &res.Meta); err != nil {
		return nil, &LoadError{File: MetaFile, Err: err}
	}
	err = eachLine(dir, RunsFile, func(line []byte) error {
		run := new(Run)
		if err := json.Unmarshal(line, run); err != nil {
			return err
		}
		switch {
		case run.ID == "":
			return errors.New(`no "run" id`)
		case res.Run(run.ID) != nil:
			return fmt.Errorf("run %q again", run.ID)
		}
		res.Runs = append(res.Runs, run)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachLine(dir, RecordsFile, func(line []byte) error {
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return err
		}
		if res.Run(rec.Run) == nil {
			return fmt.Errorf("run %q is not in %s", rec.Run, RunsFile)
		}
		res.Records[rec.Run] = append(res.Records[rec.Run], rec.Record)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, LinksFile)); errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	err = eachLine(dir, LinksFile, func(line []byte) error {
		var ls LinkSample
		if err := json.Unmarshal(line, &ls); err != nil {
			return err
		}
		if res.Run(ls.Run) == nil {
			return fmt.Errorf("run %q is not in %s", ls.Run, RunsFile)
		}
		res.Links[ls.Run] = append(res.Links[ls.Run], ls)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// eachLine calls fn with each non-empty line of dir/name, and wraps what
// fails in a *LoadError naming the line.
func eachLine(dir, name string, fn func([]byte) error) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return &LoadError{File: name, Err: err}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return &LoadError{File: name, Line: line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return &LoadError{File: name, Err: err}
	}
	return nil
}
