package lab

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/results"
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
	err := RunScenario(context.Background(), s, RunOptions{Lab: labOpts, Out: out, Progress: &progress, ScenarioFile: "exp.yaml"})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
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
		if len(r.Events) != 2 || r.EventsNote != "" {
			t.Errorf("run %s: events %+v (%s)", r.ID, r.Events, r.EventsNote)
			continue
		}
		checkFidelity(t, r)
		for _, ev := range r.Events {
			// Applied within 20 ms of its time (Go's timers overshoot
			// by about 1 ms here).
			if ev.Error != "" || ev.AppliedAfter < ev.At || ev.AppliedAfter > ev.At+20e6 {
				t.Errorf("run %s: event %+v", r.ID, ev)
			}
		}
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
