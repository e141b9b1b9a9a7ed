package lab

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/live"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// runTopology is a small lab: two sites whose xTRs are joined by two
// emulated 10 Mbit/s links, the map-server behind xtrb; p2 goes down for
// 300 ms during each run.
const runTopology = `name: NAME
nodes:
  - {name: client, role: host}
  - {name: server, role: host, pm: {policy: default}}
  - {name: xtra, role: xtr, site: a}
  - {name: xtrb, role: xtr, site: b}
  - {name: ms, role: ms}
sites: [{name: a}, {name: b}]
links:
  - {ends: [client, xtra]}
  - {ends: [server, xtrb]}
  - {name: p1, ends: [xtra, xtrb], rate: 10Mbit, delay: 2ms}
  - {name: p2, ends: [xtra, xtrb], rate: 10Mbit, delay: 2ms}
  - {ends: [xtrb, ms]}
timeline:
  - {at: 100ms, link: p2, action: down}
  - {at: 400ms, link: p2, action: up}
`

const runScenario = `name: NAME
topology: lab.yaml
flows:
  - {name: f, from: client, to: server, kind: transfer, size: 1MiB, direction: download}
variants:
  pm: [tcp, subflows 2]
  cc: [cubic]
repetitions: 2
timeout: 30s
`

// TestRunScenario runs 2 variants x 2 repetitions of a 1 MiB download
// and checks the results directory as the report reads it: every run,
// interleaved, with its variant, its fidelity measured, its events
// applied, and its flow's completion at both ends over the variant's
// protocol with cubic.
func TestRunScenario(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-run"
	s := loadRunScenario(t, name, runScenario)
	labOpts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, labOpts)
	out := filepath.Join(t.TempDir(), "results")
	var progress bytes.Buffer
	view := &countingView{Server: live.New(name)}
	err := RunScenario(context.Background(), s, RunOptions{Lab: labOpts, Out: out, Progress: &progress, ScenarioFile: "exp.yaml", Observer: view})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	checkLiveView(t, view)
	if !strings.Contains(progress.String(), "[4/4] pm=subflows 2 cc=cubic rep 2: ") || !strings.Contains(progress.String(), "ETA") {
		t.Errorf("progress does not end with the fourth run and an ETA")
	}

	res, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	meta, runs := res.Meta, res.Runs
	if meta.Settings.Runs != 4 || meta.CPUs < 1 || !strings.HasPrefix(meta.Kernel, "Linux ") ||
		!strings.Contains(meta.ScenarioSource, "subflows 2") || !strings.Contains(meta.TopologySource, "p2") {
		t.Errorf("meta.json: %+v", meta)
	}

	wantPM := []string{"tcp", "subflows 2", "tcp", "subflows 2"}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 4", len(runs))
	}
	for i, r := range runs {
		if r.Error != "" || r.Variant["pm"] != wantPM[i] || r.Variant["cc"] != "cubic" || r.Repetition != i/2+1 || !r.Ended.After(r.Started) {
			t.Errorf("run %d: %+v; want pm=%s cc=cubic rep %d", i, r, wantPM[i], i/2+1)
		}
		if r.EventsNote != "" {
			t.Errorf("run %s: events %+v (%s)", r.ID, r.Events, r.EventsNote)
			continue
		}
		checkFidelity(t, r)
		checkLinkSamples(t, r, res.Links[r.ID])
		checkEvents(t, r, s.Events(s.Runs()[i].Variant))
	}

	ends := map[string][]traffic.Record{}
	samples := map[string]int{}
	for id, recs := range res.Records {
		for _, r := range recs {
			if r.Kind == traffic.KindResult {
				ends[id] = append(ends[id], r)
			} else {
				samples[id]++
			}
		}
	}
	for i, r := range runs {
		res := ends[r.ID]
		if len(res) != 2 || samples[r.ID] == 0 {
			t.Errorf("run %s: %d results (want the client's and the server's), %d samples", r.ID, len(res), samples[r.ID])
			continue
		}
		want := traffic.MPTCP
		if i%2 == 0 {
			want = traffic.TCP
		}
		for _, rec := range res {
			if rec.Flow != "f" || rec.Error != "" || rec.Completion <= 0 || rec.CongestionControl != "cubic" || rec.Protocol != want {
				t.Errorf("run %s: result %+v; want flow f over %s with cubic", r.ID, rec, want)
			}
			if rec.Role == traffic.Receiver && rec.BytesReceived != 1<<20 {
				t.Errorf("run %s: the client received %d bytes", r.ID, rec.BytesReceived)
			}
		}
	}
}

// checkLinkSamples checks a run's link samples: both directions of p1
// and p2 every 100 ms or so while the flow ran, and the 1 MiB download
// delivered by the links from xtrb to xtra (b-to-a), the tunnels'
// headers on top.
func checkLinkSamples(t *testing.T, r *results.Run, samples []results.LinkSample) {
	t.Helper()
	first, last := map[string]results.LinkSample{}, map[string]results.LinkSample{}
	var times []time.Time
	for _, ls := range samples {
		key := ls.Link + " " + ls.Direction
		if _, ok := first[key]; !ok {
			first[key] = ls
		}
		last[key] = ls
		if key == "p1 a-to-b" {
			times = append(times, ls.Time)
		}
	}
	if len(first) != 4 || len(times) < 3 || r.LinksError != "" {
		t.Errorf("run %s: link samples of %d link directions, %d times (%s)", r.ID, len(first), len(times), r.LinksError)
		return
	}
	gaps := make([]time.Duration, len(times)-1)
	for i := range gaps {
		gaps[i] = times[i+1].Sub(times[i])
	}
	// Every 100 ms in the median: a late tick makes one gap longer and
	// the next shorter. The bounds are wide, for a busy machine: a
	// sampler at the wrong interval (every sample or every second) is
	// off by ten times. BenchmarkEventLateness measures the timing.
	slices.Sort(gaps)
	if g := gaps[len(gaps)/2]; g < 10*time.Millisecond || g >= time.Second {
		t.Errorf("run %s: link samples %v apart (median), want 100 ms", r.ID, g)
	}
	for i := 1; i < len(times); i++ {
		if !times[i].After(times[i-1]) {
			t.Errorf("run %s: link sample %d at %v, not after the one before at %v", r.ID, i, times[i], times[i-1])
		}
	}
	var down uint64
	for _, l := range []string{"p1 b-to-a", "p2 b-to-a"} {
		down += last[l].DeliveredBytes - first[l].DeliveredBytes
	}
	if down < 1<<20 || down > 2<<20 {
		t.Errorf("run %s: the links delivered %d bytes from xtrb to xtra during a 1 MiB download", r.ID, down)
	}
}

// eventLateness bounds how late the runner may apply an event: a
// thousand times what it takes on an idle machine (a millisecond or two),
// so that only a broken runner misses it. BenchmarkEventLateness measures
// the lateness itself.
const eventLateness = time.Second

// checkEvents checks that a run applied the planned events, each without
// error, at or after its time, before the next one's time (so in order,
// and the timeline's outages happened) and within eventLateness; it
// returns when each was applied, from the flows' start.
func checkEvents(t *testing.T, r *results.Run, planned []topo.Event) (applied []time.Duration, ok bool) {
	t.Helper()
	if len(r.Events) != len(planned) {
		t.Errorf("run %s: events %+v, want %d: %+v", r.ID, r.Events, len(planned), planned)
		return nil, false
	}
	ok = true
	for i, ev := range r.Events {
		p := planned[i]
		deadline := ev.At + eventLateness
		if i+1 < len(planned) {
			deadline = min(deadline, planned[i+1].At.Duration)
		}
		if ev.Error != "" || ev.Link != p.Link || ev.Action != string(p.Action) || ev.At != p.At.Duration ||
			ev.AppliedAfter < ev.At || ev.AppliedAfter >= deadline {
			t.Errorf("run %s: event %+v, want %s %s applied at %v or up to %v later", r.ID, ev, p.Link, p.Action, p.At, deadline-ev.At)
			ok = false
		}
		applied = append(applied, ev.AppliedAfter)
	}
	return applied, ok
}

// countingView is the live view, counting the events it was told of.
type countingView struct {
	*live.Server
	events atomic.Int32
}

func (v *countingView) EventApplied(ev results.Event) {
	v.events.Add(1)
	v.Server.EventApplied(ev)
}

// checkLiveView checks what the observer saw of TestRunScenario's runs:
// every start and end, every event, and the last run's subflows, goodput
// and completion.
func checkLiveView(t *testing.T, view *countingView) {
	t.Helper()
	st := view.State()
	if st.Total != 4 || st.Done != 4 || st.Failed != 0 || len(st.Runs) != 4 || st.Current == nil {
		t.Fatalf("live view: %d of %d runs done, %d failed, %d in the table", st.Done, st.Total, st.Failed, len(st.Runs))
	}
	for i, r := range st.Runs {
		pm := []string{"tcp", "subflows 2"}[i%2]
		if r.ID != fmt.Sprintf("%03d", i+1) || r.Variant != "pm="+pm+" cc=cubic" || len(r.Completions) != 1 || r.Completions[0].Completion <= 0 {
			t.Errorf("live view, run %d: %+v; want pm=%s and the completion of f", i, r, pm)
		}
	}
	if n := view.events.Load(); n != 8 {
		t.Errorf("live view: told of %d events applied, want 2 in each of 4 runs", n)
	}
	last := st.Current
	subflows, goodput := 0, 0
	for _, s := range last.Series {
		switch {
		case s.Kind == live.SeriesSubflow && s.Subflow >= 1 && len(s.Points) > 0:
			subflows++
		case s.Kind == live.SeriesReceiver && s.Flow == "f" && len(s.Points) > 0:
			goodput++
		}
	}
	if last.ID != "004" || last.FlowsStart.IsZero() || subflows == 0 || goodput != 1 {
		t.Errorf("live view, last run %s: flows started %v, %d MPTCP subflows and %d goodput series with points",
			last.ID, last.FlowsStart, subflows, goodput)
	}
}

// TestRunAllToAll runs an all-to-all background pattern between the two
// hosts of runTopology's lab: both directions' flows run at once, each on
// its own port, and each receiver gets its 2 Mbit/s for 2 s (the links
// have 10 Mbit/s and no loss, and the failure none keeps p2 up): no more
// than was sent, and at least half of it, which a pacer at the wrong
// rate misses and a busy machine's late datagrams do not.
func TestRunAllToAll(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Prefix + "-a2a"
	s := loadRunScenario(t, name, `name: NAME
topology: lab.yaml
flows:
  - {name: mesh, between: [client, server], kind: background, rate: 2Mbit, duration: 2s}
variants: {failure: [none]}  # without the topology's outage of p2
fidelity: false
timeout: 30s
`)
	res, _ := runTestScenario(t, s, "exp.yaml")
	received := map[string]uint64{}
	for _, rec := range res.Records[res.Runs[0].ID] {
		if rec.Kind == traffic.KindResult && rec.Role == traffic.Receiver {
			received[rec.Flow] = rec.BytesReceived
		}
	}
	const want = 2e6 * 2 / 8
	for _, flow := range []string{"mesh/client>server", "mesh/server>client"} {
		if got := received[flow]; got < want*0.5 || got > want*1.05 {
			t.Errorf("%s: received %d bytes, want about %.0f", flow, got, want)
		}
	}
	if len(received) != 2 {
		t.Errorf("receivers' results of %v, want the two directions'", received)
	}
}
