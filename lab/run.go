package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/internal/jsonl"
	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// EventApplier applies timeline events to a running lab's links (a
// LinkControl does).
type EventApplier interface {
	Apply(ev topo.Event) error
}

// RunOptions say where a scenario's lab lives and where its results go.
type RunOptions struct {
	// Lab are the options of the lab's up and down; their Progress gets
	// the lab's steps (nil: quiet).
	Lab Options
	// Out is the results directory, created if needed.
	Out string
	// Progress gets a line per run with the time left (nil: none).
	Progress io.Writer
	// ScenarioFile is the scenario's path, for meta.json.
	ScenarioFile string
	// Links opens the link control of a lab that is up, to apply the
	// timeline's events; nil means OpenLinks.
	Links func(name string, opts Options) (EventApplier, error)
	// Observer watches the runs as they happen (nil: none), as the live
	// view does.
	Observer Observer

	// linkSamples is where RunScenario writes the runs' link samples.
	linkSamples *jsonl.Writer
}

// RunScenario runs every run of a scenario, in order, each in a lab of
// its own that it brings up and takes down, and writes the results to
// opts.Out (docs/lab.md, "Results"). Cancelling ctx ends the run under
// way, takes its lab down and skips the others; the run is recorded
// with the error, and ctx's error returned. A failed run does not stop
// the others: the error then says how many failed.
func RunScenario(ctx context.Context, s *scenario.Scenario, opts RunOptions) error {
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return err
	}
	runs := s.Runs()
	start := time.Now()
	var cal []results.Calibration
	if len(s.Calibrate) > 0 {
		cal = calibrate(ctx, s, opts)
	}
	if err := writeMeta(s, opts, len(runs), start, cal); err != nil {
		return err
	}
	runsFile, err := os.Create(filepath.Join(opts.Out, results.RunsFile))
	if err != nil {
		return err
	}
	defer runsFile.Close()
	recFile, err := os.Create(filepath.Join(opts.Out, results.RecordsFile))
	if err != nil {
		return err
	}
	defer recFile.Close()
	recs := &recordWriter{Writer: jsonl.NewWriter(recFile)}
	linkFile, err := os.Create(filepath.Join(opts.Out, results.LinksFile))
	if err != nil {
		return err
	}
	defer linkFile.Close()
	opts.linkSamples = jsonl.NewWriter(linkFile)
	release, err := useCongestion(s)
	if err != nil {
		return err
	}
	defer release()
	enc := json.NewEncoder(runsFile)
	obs := opts.observer()
	var eval *claims.Evaluator
	var runRecs *traffic.Collector
	if len(s.Claims) > 0 {
		eval, runRecs = claims.NewEvaluator(s.Claims), &traffic.Collector{}
	}
	rec := teeRecorder{file: recs, obs: obs, run: runRecs}
	failed, skipped := 0, 0
	for i, run := range runs {
		if ctx.Err() != nil {
			break
		}
		recs.startRun(run.ID)
		if runRecs != nil {
			runRecs.Reset()
		}
		obs.RunStarted(run, len(runs))
		// Read at each run: a congestion control that a loader registers
		// or removes meanwhile counts from the next run on.
		var e results.Run
		if why := readKernelOffers().unavailable(s, run.Variant, opts.Lab.dir(s.Name)); why != "" {
			now := time.Now()
			e = results.Run{ID: run.ID, Index: run.Index, Repetition: run.Repetition, Variant: run.Variant.Map(),
				Started: now, Ended: now, Events: []results.Event{}, Skipped: why}
			skipped++
		} else {
			e = runOne(ctx, s, run, opts, rec)
		}
		obs.RunEnded(e)
		if err := errors.Join(recs.Flush(), opts.linkSamples.Flush(), enc.Encode(e)); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		if e.Error != "" {
			failed++
		}
		if eval != nil {
			eval.AddRun(&e, runRecs.Records())
			if co, ok := obs.(ClaimsObserver); ok {
				co.ClaimsEvaluated(eval.Results())
			}
		}
		progressLine(opts.Progress, i, len(runs), run, e, start, failed)
	}
	if eval != nil && opts.Progress != nil {
		fmt.Fprintln(opts.Progress)
		claims.WriteTable(opts.Progress, eval.Results())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed (see %s)", failed, len(runs), filepath.Join(opts.Out, results.RunsFile))
	}
	return nil
}

// progressLine prints "[3/12] pm=amptcp cc=cubic rep 1: 4.2 s, ETA 38 s":
// the time left is the mean run's time so far times the runs left.
func progressLine(w io.Writer, i, n int, run scenario.Run, e results.Run, start time.Time, failed int) {
	if w == nil {
		return
	}
	took := e.Ended.Sub(e.Started)
	eta := time.Duration(float64(time.Since(start)) / float64(i+1) * float64(n-i-1))
	line := fmt.Sprintf("[%d/%d] %s rep %d: %.1f s, ETA %s", i+1, n, run.Variant, run.Repetition, took.Seconds(), eta.Round(time.Second))
	if e.Skipped != "" {
		line = fmt.Sprintf("[%d/%d] %s rep %d: skipped: %s", i+1, n, run.Variant, run.Repetition, e.Skipped)
	}
	if e.Error != "" {
		line += fmt.Sprintf(" (failed: %s; %d failed so far)", e.Error, failed)
	}
	fmt.Fprintln(w, line)
	if e.Flagged() {
		fmt.Fprintf(w, "[%d/%d] warning: the emulation missed its configuration: %s\n", i+1, n, Misses(e.Fidelity))
	}
}

func writeMeta(s *scenario.Scenario, opts RunOptions, runs int, start time.Time, cal []results.Calibration) error {
	m := results.Meta{Short: s.Short, Calibration: cal,
		Scenario: s.Name, ScenarioFile: opts.ScenarioFile, ScenarioSource: string(s.Source),
		TopologyFile: s.TopologyPath, TopologySource: string(s.TopologySource),
		Kernel: uname(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Version: buildinfo.Version,
		Started: start,
		Settings: results.Settings{Repetitions: s.Repetitions, Runs: runs, Timeout: s.Timeout.Duration,
			Dimensions: []results.Dimension{}, Events: "applied through the lab's link control"},
	}
	for _, d := range s.Variants.Dims {
		m.Settings.Dimensions = append(m.Settings.Dimensions, results.Dimension{Name: d.Name, Values: d.Values})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(opts.Out, results.MetaFile), append(b, '\n'), 0o644)
}

// uname is "Linux 6.18.0 #1 SMP ... x86_64".
func uname() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown: " + err.Error()
	}
	return strings.Join([]string{unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
		unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])}, " ")
}

// withLab brings a lab of t up, calls fn with its plan, and takes it
// down, whatever happened.
func withLab(ctx context.Context, t *topo.Topology, path string, opts Options, fn func(*topo.Plan) error) (err error) {
	if _, err := Up(ctx, t, path, opts); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer func() {
		if derr := Down(t.Name, opts); derr != nil {
			err = errors.Join(err, fmt.Errorf("down: %w", derr))
		}
	}()
	plan, err := topo.Compile(t, opts.dir(t.Name))
	if err != nil {
		return err
	}
	return fn(plan)
}

// runOne brings the variant's lab up, runs the flows and the events, and
// takes the lab down, whatever happened.
func runOne(ctx context.Context, s *scenario.Scenario, run scenario.Run, opts RunOptions, rec traffic.Recorder) results.Run {
	e := results.Run{ID: run.ID, Index: run.Index, Repetition: run.Repetition, Variant: run.Variant.Map(),
		Started: time.Now(), Events: []results.Event{}}
	t := s.TopologyFor(run.Variant)
	if to, ok := opts.observer().(TopologyObserver); ok {
		to.TopologyStarted(t)
	}
	err := withLab(ctx, t, s.TopologyPath, opts.Lab, func(plan *topo.Plan) error {
		var fid *fidelityRun
		if s.MeasuresFidelity() {
			fid = startFidelity(ctx, plan, opts.Lab, s.Plan(run.Variant))
		}
		err := runFlows(ctx, s, run, plan, opts, rec, &e)
		e.Fidelity = fid.finish()
		e.MPTCPCounters = hostsMPTCPCounters(plan)
		return err
	})
	if err != nil {
		e.Error = err.Error()
	}
	e.Ended = time.Now()
	return e
}

// useCongestion registers amptcp's congestion controls that the
// scenario's flows use (amp_lia, ...) for the length of the runs, unless
// another program has them already; the function it returns unregisters
// what it loaded. The kernel's own (reno, cubic, bbr) need nothing.
func useCongestion(s *scenario.Scenario) (release func(), err error) {
	var releases []func() error
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, n := range s.CongestionControls() {
		if !cc.Is(n) {
			continue
		}
		r, err := cc.Use(n)
		if err != nil {
			release()
			return nil, fmt.Errorf("load the congestion control %s: %w", n, err)
		}
		releases = append(releases, r)
	}
	return release, nil
}
