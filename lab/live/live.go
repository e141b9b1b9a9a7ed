// Package live keeps the live state of a scenario run (`amptcp lab run
// -live ADDR`, docs/lab.md "Live view") and serves it over HTTP: a page
// that draws it, /state, a JSON snapshot, and /events, a stream of
// updates (Server-Sent Events). The runner feeds a Server as its
// lab.Observer. What it keeps is bounded, the current run's samples and
// the summaries of the latest runs, so that a scenario of hours costs no
// more memory than one of minutes; and nothing it does waits for a
// client.
package live

import (
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// The bounds of what a Server keeps.
const (
	// MaxPoints is the most points kept per series: 5 minutes of 100 ms
	// samples. The oldest quarter goes when a series is full.
	MaxPoints = 3000
	// MaxSeries is the most series kept per run; the samples of a run's
	// further subflows and flows are dropped and counted in
	// SamplesLeftOut.
	MaxSeries = 128
	// MaxCompletions is the most flows' completions kept per run.
	MaxCompletions = 256
	// MaxEvents is the most timeline events kept per run.
	MaxEvents = 256
	// MaxRuns is the most summaries of ended runs kept.
	MaxRuns = 1000
	// LoadsInterval is how often at most the links' loads are sent to
	// the clients: the page shows them at least every second.
	LoadsInterval = 500 * time.Millisecond
)

// The kinds of series.
const (
	// SeriesSubflow is the sender's samples of a subflow (of a plain TCP
	// connection: subflow 0): the acknowledged rate between consecutive
	// samples, the smoothed RTT and the congestion window.
	SeriesSubflow = "subflow"
	// SeriesReceiver is a flow's goodput at its receiver.
	SeriesReceiver = "receiver"
)

// Progress is how far the scenario has come.
type Progress struct {
	Total   int `json:"total"` // the scenario's runs
	Done    int `json:"done"`  // runs ended
	Failed  int `json:"failed"`
	Flagged int `json:"flagged"` // runs whose fidelity was measured and missed
	// Started is when the first run started.
	Started time.Time `json:"started,omitzero"`
	// ETA is when the last run should end: the mean time of the runs so
	// far times the runs left, as the progress lines on stderr say.
	ETA time.Time `json:"eta,omitzero"`
}

// State is the live view at one moment: what /state returns and the
// first message of /events.
type State struct {
	Scenario string `json:"scenario"`
	Progress
	// Current is the run under way, or the last one once it ended; nil
	// before the first.
	Current *Run `json:"current"`
	// Runs are the latest runs that ended, oldest first, at most MaxRuns;
	// RunsLeftOut counts the older ones no longer kept.
	Runs        []Summary `json:"runs"`
	RunsLeftOut int       `json:"runs_left_out,omitempty"`
	// Disconnected counts the /events clients cut off because they fell
	// behind (a browser reconnects and gets a new snapshot); Strays the
	// records that came outside a run, which were dropped.
	Disconnected uint64 `json:"disconnected"`
	Strays       uint64 `json:"strays,omitempty"`
	MaxPoints    int    `json:"max_points"`
	MaxRuns      int    `json:"max_runs"`
	// Topology is the current run's network with its links' state and
	// loads; nil before the first run.
	Topology *Topology `json:"topology"`
	// Claims are the scenario's claims as the runs so far measure them.
	Claims []claims.Result `json:"claims"`
	// Control says whether the run's links can be changed now (its flows
	// run, the lab has a link daemon).
	Control bool `json:"control"`
}

// RunInfo says which run it is and, once it ended, how.
type RunInfo struct {
	ID         string `json:"run"`
	Index      int    `json:"index"`
	Repetition int    `json:"repetition"`
	// Variant is "pm=amptcp cc=cubic", as the progress lines say.
	Variant string    `json:"variant"`
	Started time.Time `json:"started"`
	// Ended, Error and Fidelity are set when the run ends.
	Ended    time.Time         `json:"ended,omitzero"`
	Error    string            `json:"error,omitempty"`
	Fidelity *results.Fidelity `json:"fidelity"`
}

// Run is a run as the live view shows it. Times in its series are
// seconds since the run's flows started (since the run started until
// they do).
type Run struct {
	RunInfo
	FlowsStart time.Time `json:"flows_start,omitzero"`
	// Events are the timeline's events as they are applied; at the end,
	// all of them, those not applied too.
	Events         []results.Event `json:"events"`
	Series         []*Series       `json:"series"`
	SamplesLeftOut int             `json:"samples_left_out,omitempty"`
	// Completions are the flows that ended, in the order they did.
	Completions        []Completion `json:"completions"`
	CompletionsLeftOut int          `json:"completions_left_out,omitempty"`

	series      map[seriesKey]*Series
	completions map[string]int
}

// Series is one line of the charts: a subflow's or a flow's receiver.
type Series struct {
	Kind    string  `json:"kind"` // SeriesSubflow or SeriesReceiver
	Flow    string  `json:"flow"`
	Subflow uint8   `json:"subflow"`
	Local   string  `json:"local,omitempty"`
	Remote  string  `json:"remote,omitempty"`
	Points  []Point `json:"points"`

	last traffic.Record // the previous sample, for the rate
}

type seriesKey struct {
	kind    string
	flow    string
	subflow uint8
}

// Point is one sample of a series.
type Point struct {
	T    float64 `json:"t"`    // seconds since the flows started
	Mbps float64 `json:"mbps"` // acknowledged (subflow) or received (receiver)
	// RTT (smoothed, in ms) and Cwnd (segments) are a subflow's.
	RTT  float64 `json:"rtt_ms,omitempty"`
	Cwnd uint32  `json:"cwnd,omitempty"`
}

// Completion is a flow's end, as its client saw it (the end that
// started first, as the report counts it), with the bytes and the error
// of either end.
type Completion struct {
	Flow       string        `json:"flow"`
	Kind       string        `json:"kind,omitempty"`     // transfer, saturate, background
	Protocol   string        `json:"protocol,omitempty"` // what the connection really used
	Completion time.Duration `json:"completion_ns"`
	Bytes      uint64        `json:"bytes"`
	Error      string        `json:"error,omitempty"`

	start time.Time
}

// Summary is a run that ended, a line of the runs table.
type Summary struct {
	RunInfo
	Flagged     bool         `json:"flagged"`
	Completions []Completion `json:"completions"`
}

// Server keeps the live state of a scenario run and serves it (see
// ServeHTTP). Its methods are safe for concurrent use and never wait for
// a client.
type Server struct {
	mu           sync.Mutex
	scenario     string
	progress     Progress
	current      *Run
	runs         []Summary
	runsLeftOut  int
	disconnected uint64
	strays       uint64
	clients      map[*client]struct{}

	topology *Topology
	timeline []topo.Event // the run's scheduled events, for their values
	claims   []claims.Result
	control  func(topo.Event) error
	// loadsSent is when the links' loads were last broadcast.
	loadsSent time.Time

	// token must come with every control request: the page has it, a
	// page of another origin cannot read it.
	token string

	mux       *http.ServeMux
	closeOnce sync.Once
	closed    chan struct{}
	srv       *http.Server // once listening
}

// New returns a Server for the scenario of that name.
func New(scenarioName string) *Server {
	s := &Server{scenario: scenarioName, clients: map[*client]struct{}{}, closed: make(chan struct{}), token: newToken()}
	s.mux = s.routes()
	return s
}

// RunStarted starts a run's view: the previous run's samples go.
func (s *Server) RunStarted(run scenario.Run, total int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.Total = total
	if s.progress.Started.IsZero() {
		s.progress.Started = now
	}
	s.current = &Run{RunInfo: RunInfo{ID: run.ID, Index: run.Index, Repetition: run.Repetition, Variant: run.Variant.String(),
		Started: now}, Events: []results.Event{}, Series: []*Series{}, Completions: []Completion{},
		series: map[seriesKey]*Series{}, completions: map[string]int{}}
	p := s.progress
	s.broadcast(Update{Type: UpdateRun, Run: s.current.copy(), Progress: &p})
}

// FlowsStarted sets the origin of the run's times.
func (s *Server) FlowsStarted(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil || !s.current.Ended.IsZero() {
		return
	}
	s.current.FlowsStart = at
	s.broadcast(Update{Type: UpdateFlows, FlowsStart: at})
}

// EventApplied marks an event on the run's charts, and a scheduled one's
// change on its link (the controls' are marked when they are applied).
func (s *Server) EventApplied(ev results.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ev.Manual && ev.Error == "" {
		for _, te := range s.timeline {
			if te.At.Duration == ev.At && te.Link == ev.Link && string(te.Action) == ev.Action && te.Detail() == ev.Detail {
				s.linkChanged(te)
				break
			}
		}
	}
	run := s.current
	if run == nil || !run.Ended.IsZero() || len(run.Events) >= MaxEvents {
		return
	}
	run.Events = append(run.Events, ev)
	s.broadcast(Update{Type: UpdateEvent, Event: &ev})
}

// linkChanged applies an event to the topology and tells the clients
// of the link's new state. s.mu is held.
func (s *Server) linkChanged(ev topo.Event) {
	if s.topology == nil || !s.topology.applyEvent(ev) {
		return
	}
	l := *s.topology.link(ev.Link)
	s.broadcast(Update{Type: UpdateLink, Link: &l})
}

// TopologyStarted shows a run's topology, placed, with its links as
// configured and carrying nothing yet.
func (s *Server) TopologyStarted(t *topo.Topology) {
	top := newTopology(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topology, s.timeline = top, slices.Clone(t.Timeline)
	c := top.copy()
	s.broadcast(Update{Type: UpdateTopology, Topology: c})
}

// LinksSampled takes a round of the emulated links' counters: each
// link's load, sent to the clients at most every LoadsInterval.
func (s *Server) LinksSampled(round []results.LinkSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topology == nil || !s.topology.sample(round) || len(s.clients) == 0 {
		return
	}
	if now := time.Now(); now.Sub(s.loadsSent) >= LoadsInterval {
		s.loadsSent = now
		s.broadcast(Update{Type: UpdateLoads, Loads: s.topology.loads()})
	}
}

// ClaimsEvaluated shows the claims as the runs so far measure them.
func (s *Server) ClaimsEvaluated(rs []claims.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = slices.Clone(rs)
	s.broadcast(Update{Type: UpdateClaims, Claims: s.claims})
}

// ControlAvailable makes the controls apply events to the run under way
// (nil: none now).
func (s *Server) ControlAvailable(apply func(topo.Event) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.control = apply
	on := apply != nil
	s.broadcast(Update{Type: UpdateControl, Control: &on})
}

// RunEnded ends the run's view with its error, events and fidelity, and
// adds it to the table of runs.
func (s *Server) RunEnded(e results.Run) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.current
	if run == nil || run.ID != e.ID || !run.Ended.IsZero() {
		// Not the run that started (the runner does not do this): a
		// view of its own, without samples.
		run = &Run{RunInfo: RunInfo{ID: e.ID, Index: e.Index, Repetition: e.Repetition, Variant: variantLabel(e.Variant),
			Started: e.Started}, Series: []*Series{}, Completions: []Completion{}}
		s.current = run
	}
	run.Ended, run.Error, run.Fidelity = e.Ended, e.Error, e.Fidelity
	if run.Ended.IsZero() {
		run.Ended = now
	}
	if run.FlowsStart.IsZero() {
		run.FlowsStart = e.FlowsStart
	}
	if len(e.Events) > 0 {
		run.Events = append([]results.Event(nil), e.Events[:min(len(e.Events), MaxEvents)]...)
	}
	p := &s.progress
	p.Done++
	if e.Error != "" {
		p.Failed++
	}
	if e.Flagged() {
		p.Flagged++
	}
	if p.Started.IsZero() {
		p.Started = run.Started
	}
	if left := p.Total - p.Done; left >= 0 {
		p.ETA = now.Add(time.Duration(float64(now.Sub(p.Started)) / float64(p.Done) * float64(left)))
	}
	sum := Summary{RunInfo: run.RunInfo, Flagged: e.Flagged(), Completions: append([]Completion{}, run.Completions...)}
	s.runs = append(s.runs, sum)
	if len(s.runs) > MaxRuns {
		s.runs = s.runs[1:]
		s.runsLeftOut++
	}
	progress := *p
	s.broadcast(Update{Type: UpdateEnd, Summary: &sum, Events: run.Events, Progress: &progress})
}

// variantLabel names a run's variant when its start was not seen.
func variantLabel(v results.Variant) string {
	if len(v) == 0 {
		return "default"
	}
	return v.Name()
}

// Record takes a record of the run under way: a subflow's sample adds a
// point to its series, a receiver's to its flow's goodput, a result
// ends a flow.
func (s *Server) Record(r traffic.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.current
	if run == nil || !run.Ended.IsZero() {
		s.strays++
		return
	}
	switch r.Kind {
	case traffic.KindSubflow:
		sr := s.seriesOf(run, seriesKey{SeriesSubflow, r.Flow, r.Subflow})
		if sr == nil {
			return
		}
		if r.Local.IsValid() {
			sr.Local, sr.Remote = r.Local.String(), r.Remote.String()
		}
		prev := sr.last
		sr.last = r
		dt := r.Time.Sub(prev.Time).Seconds()
		if prev.Time.IsZero() || dt <= 0 || r.BytesAcked < prev.BytesAcked {
			return
		}
		s.addPoint(sr, Point{T: run.since(r.Time), Mbps: float64(r.BytesAcked-prev.BytesAcked) * 8 / dt / 1e6,
			RTT: float64(r.RTT) / 1e6, Cwnd: r.Cwnd})
	case traffic.KindReceiver:
		if sr := s.seriesOf(run, seriesKey{SeriesReceiver, r.Flow, 0}); sr != nil {
			s.addPoint(sr, Point{T: run.since(r.Time), Mbps: r.Goodput / 1e6})
		}
	case traffic.KindResult:
		s.complete(run, r)
	}
}

// since is t in seconds since the run's flows started.
func (run *Run) since(t time.Time) float64 {
	origin := run.FlowsStart
	if origin.IsZero() {
		origin = run.Started
	}
	return t.Sub(origin).Seconds()
}

// seriesOf returns the run's series of key, new if it has none and there
// is room; nil if there is not.
func (s *Server) seriesOf(run *Run, key seriesKey) *Series {
	if sr := run.series[key]; sr != nil {
		return sr
	}
	if len(run.Series) >= MaxSeries {
		run.SamplesLeftOut++
		return nil
	}
	sr := &Series{Kind: key.kind, Flow: key.flow, Subflow: key.subflow, Points: []Point{}}
	run.series[key] = sr
	run.Series = append(run.Series, sr)
	return sr
}

// addPoint adds p to the series and tells the clients. A point that is
// not a finite number is dropped: JSON has none.
func (s *Server) addPoint(sr *Series, p Point) {
	if !finite(p.T) || !finite(p.Mbps) || !finite(p.RTT) {
		return
	}
	if len(sr.Points) >= MaxPoints {
		n := copy(sr.Points, sr.Points[MaxPoints/4:])
		sr.Points = sr.Points[:n]
	}
	sr.Points = append(sr.Points, p)
	if len(s.clients) > 0 {
		one := *sr
		one.Points = []Point{p}
		s.broadcast(Update{Type: UpdatePoint, Series: &one})
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// complete notes a flow's result: the one that started first is the
// client's, whose completion time a user sees.
func (s *Server) complete(run *Run, r traffic.Record) {
	c := Completion{Flow: r.Flow, Completion: r.Completion, Bytes: max(r.BytesSent, r.BytesReceived),
		Error: r.Error, start: r.Start}
	if r.FlowKind != 0 {
		c.Kind = r.FlowKind.String()
	}
	if r.Protocol != 0 {
		c.Protocol = r.Protocol.String()
	}
	i, ok := run.completions[r.Flow]
	switch {
	case ok:
		old := run.Completions[i]
		if !old.start.IsZero() && !c.start.Before(old.start) {
			c, old = old, c
		}
		c.Bytes = max(c.Bytes, old.Bytes)
		if c.Error == "" {
			c.Error = old.Error
		}
		run.Completions[i] = c
	case len(run.Completions) >= MaxCompletions:
		run.CompletionsLeftOut++
		return
	default:
		run.completions[r.Flow] = len(run.Completions)
		run.Completions = append(run.Completions, c)
	}
	s.broadcast(Update{Type: UpdateCompletion, Completion: &c})
}

// State returns a copy of the live state.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Server) stateLocked() State {
	st := State{Scenario: s.scenario, Progress: s.progress, Runs: append([]Summary{}, s.runs...),
		RunsLeftOut: s.runsLeftOut, Disconnected: s.disconnected, Strays: s.strays,
		MaxPoints: MaxPoints, MaxRuns: MaxRuns, Claims: append([]claims.Result{}, s.claims...), Control: s.control != nil}
	if s.topology != nil {
		st.Topology = s.topology.copy()
	}
	if s.current != nil {
		st.Current = s.current.copy()
	}
	return st
}

// copy is a deep copy of the run, which the lock no longer guards.
func (run *Run) copy() *Run {
	c := *run
	c.series, c.completions = nil, nil
	c.Events = append([]results.Event{}, run.Events...)
	c.Completions = append([]Completion{}, run.Completions...)
	c.Series = make([]*Series, len(run.Series))
	for i, sr := range run.Series {
		cs := *sr
		cs.Points = append([]Point{}, sr.Points...)
		c.Series[i] = &cs
	}
	return &c
}
