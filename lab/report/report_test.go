package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	amptcp  = Variant{"pm": "amptcp", "cc": "cubic", "failure": "l2-down"}
	kernel  = Variant{"pm": "kernel", "cc": "cubic", "failure": "l2-down"}
	goodFid = &Fidelity{OK: true, LatenessP99: 80 * time.Microsecond,
		Paths: []PathFidelity{{Name: "l1", RTTWant: 20 * time.Millisecond, RTT: 20100 * time.Microsecond, RateWant: 4e6, Rate: 3.98e6, OK: true}}}
	badFid = &Fidelity{OK: false, LatenessP99: 2 * time.Millisecond,
		Paths: []PathFidelity{{Name: "l2", RTTWant: 20 * time.Millisecond, RTT: 25 * time.Millisecond, RTTBase: time.Millisecond, RateWant: 4e6, Rate: 3.5e6}}}
)

// runRecords makes the records of one run starting at start: a 1 MiB
// download whose client (the receiver) completes in completion and whose
// server starts 1 ms later and finishes 5 ms sooner; a saturated upload of
// goodputMbps for 1 s with 2 ms of jitter; and two subflows of it, with
// RTTs of 20 and 20+spread ms, acknowledging 500 kB every 100 ms each.
func runRecords(start time.Time, completion time.Duration, goodputMbps float64, spread time.Duration) []traffic.Record {
	const size = 1 << 20
	recs := []traffic.Record{
		{Time: start.Add(completion), Flow: "file", Kind: traffic.KindResult, Role: traffic.Receiver, FlowKind: traffic.Transfer,
			Protocol: traffic.MPTCP, CongestionControl: "cubic", Start: start, Completion: completion, BytesReceived: size, Jitter: time.Millisecond},
		{Time: start.Add(completion), Flow: "file", Kind: traffic.KindResult, Role: traffic.Sender, FlowKind: traffic.Transfer,
			Protocol: traffic.MPTCP, CongestionControl: "cubic", Start: start.Add(time.Millisecond), Completion: completion - 6*time.Millisecond, BytesSent: size},
	}
	satStart := start.Add(10 * time.Second)
	for i := 1; i <= 10; i++ {
		at := satStart.Add(time.Duration(i) * 100 * time.Millisecond)
		for sf := uint8(1); sf <= 2; sf++ {
			rtt := 20 * time.Millisecond
			if sf == 2 {
				rtt += spread
			}
			recs = append(recs, traffic.Record{Time: at, Flow: "sat", Kind: traffic.KindSubflow, Role: traffic.Sender, Subflow: sf,
				Local:      netip.MustParseAddrPort("10.1.0.2:40000"),
				Remote:     netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, 0, sf}), 5001),
				BytesAcked: uint64(i) * 500_000, RTT: rtt})
		}
	}
	recs = append(recs, traffic.Record{Time: satStart.Add(time.Second), Flow: "sat", Kind: traffic.KindResult, Role: traffic.Receiver,
		FlowKind: traffic.Saturate, Protocol: traffic.MPTCP, CongestionControl: "cubic", Start: satStart.Add(2 * time.Millisecond),
		Completion: time.Second, BytesReceived: uint64(goodputMbps * 1e6 / 8), Jitter: 2 * time.Millisecond})
	return recs
}

// writeDir writes a results directory of four runs, two per variant:
// r0001 amptcp (1 s, 40 Mbit/s), r0002 kernel (2 s, 30 Mbit/s, no
// fidelity, no events), r0003 amptcp (3 s, 20 Mbit/s, missed fidelity),
// r0004 kernel (failed).
func writeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	meta := Meta{Scenario: "demo", ScenarioSource: "name: demo\nrepetitions: 2\n", Kernel: "Linux 6.18.0", CPUs: 2, Version: "v0.1-test", Started: t0,
		Settings: results.Settings{Repetitions: 2, Runs: 4, Dimensions: []results.Dimension{{Name: "pm", Values: []string{"amptcp", "default"}}}}}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, MetaFile, string(b))
	events := []Event{{At: 5 * time.Second, Applied: t0.Add(5*time.Second + 300*time.Microsecond), Link: "l2", Action: "down"}}
	runs := []*Run{
		{ID: "r0001", Variant: amptcp, Repetition: 1, Started: t0, Ended: t0.Add(12 * time.Second), Events: events, Fidelity: goodFid},
		{ID: "r0002", Variant: kernel, Repetition: 1, Started: t0.Add(time.Minute), Ended: t0.Add(72 * time.Second)},
		{ID: "r0003", Variant: amptcp, Repetition: 2, Started: t0.Add(2 * time.Minute), Ended: t0.Add(132 * time.Second), Events: events, Fidelity: badFid},
		{ID: "r0004", Variant: kernel, Repetition: 2, Started: t0.Add(3 * time.Minute), Ended: t0.Add(181 * time.Second), Error: "lab up: lispd did not answer\nmore"},
	}
	recs := map[string][]traffic.Record{
		"r0001": runRecords(t0, time.Second, 40, 10*time.Millisecond),
		"r0002": runRecords(t0.Add(time.Minute), 2*time.Second, 30, 30*time.Millisecond),
		"r0003": runRecords(t0.Add(2*time.Minute), 3*time.Second, 20, 50*time.Millisecond),
		"r0004": runRecords(t0.Add(3*time.Minute), 9*time.Second, 1, 0),
	}
	var runsText, recsText strings.Builder
	for _, r := range runs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		runsText.Write(append(b, '\n'))
		for _, rec := range recs[r.ID] {
			b, err := json.Marshal(results.Record{Run: r.ID, Record: rec})
			if err != nil {
				t.Fatal(err)
			}
			recsText.Write(append(b, '\n'))
		}
	}
	// runs.jsonl without the optional parts, as a runner may write it.
	writeFile(t, dir, RunsFile, strings.Replace(runsText.String(), `,"events":null,"fidelity":null`, "", 1))
	writeFile(t, dir, RecordsFile, recsText.String())
	// Run r0001's links: l1 delivers 4 Mbit/s throughout, l2 until it
	// goes down at 5 s; l3 carries a trickle, left out of the plot.
	var links strings.Builder
	delivered := map[string]uint64{}
	for i := range 120 {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		for _, l := range []string{"l1", "l2", "l3"} {
			switch {
			case l == "l1" || l == "l2" && i < 50:
				delivered[l] += 50000
			case l == "l3":
				delivered[l] += 10
			}
			b, err := json.Marshal(LinkSample{Run: "r0001", Time: at, Link: l, Direction: "a-to-b", DeliveredBytes: delivered[l]})
			if err != nil {
				t.Fatal(err)
			}
			links.Write(append(b, '\n'))
		}
	}
	writeFile(t, dir, results.LinksFile, links.String())
	return dir
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, dir string) *Results {
	t.Helper()
	res, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoad(t *testing.T) {
	dir := writeDir(t)
	runs, _ := os.ReadFile(filepath.Join(dir, RunsFile))
	if line := bytes.Split(runs, []byte("\n"))[1]; bytes.Contains(line, []byte("fidelity")) {
		t.Fatalf("the synthetic r0002 should have no fidelity key: %s", line)
	}
	res := load(t, dir)
	if len(res.Runs) != 4 || res.Meta.Kernel != "Linux 6.18.0" || res.Meta.CPUs != 2 {
		t.Fatalf("loaded %d runs, meta %+v", len(res.Runs), res.Meta)
	}
	if r := res.Run("r0002"); r.Fidelity != nil || r.Events != nil || r.Flagged() {
		t.Errorf("r0002 = %+v, want no fidelity, no events, not flagged", r)
	}
	if r := res.Run("r0003"); !r.Flagged() || len(r.Events) != 1 || r.Events[0].Label() != "l2 down" {
		t.Errorf("r0003 = %+v, want flagged with one event l2 down", r)
	}
	if n := len(res.Records["r0001"]); n != 23 {
		t.Errorf("r0001 has %d records, want 23", n)
	}
	if got := amptcp.Name(); got != "amptcp/cubic/l2-down" {
		t.Errorf("variant name %q, want amptcp/cubic/l2-down", got)
	}
	if got := (Variant{"pm": "amptcp", "cc": "reno", "subflows": "3", "failure": "none"}).Name(); got != "amptcp/reno/none/3" {
		t.Errorf("variant name %q, want amptcp/reno/none/3", got)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, text string
		line             int
		want             string
	}{
		{"meta", MetaFile, "{", 0, "unexpected end"},
		{"runs", RunsFile, `{"run":"r0001","variant":{"pm":"a"}}` + "\n\n" + `{"run":"r0002","repetition":"one"}`, 3, "repetition"},
		{"run without id", RunsFile, `{"variant":{"pm":"a"}}`, 1, `no "run" id`},
		{"run again", RunsFile, `{"run":"r0001"}` + "\n" + `{"run":"r0001"}`, 2, `run "r0001" again`},
		{"unknown key", RecordsFile, `{"run":"r0001","time":"2026-01-02T03:04:05Z","flow":"f","kind":"result","role":"sender","colour":"red"}`, 1, "colour"},
		{"unknown kind", RecordsFile, `{"run":"r0001","time":"2026-01-02T03:04:05Z","flow":"f","kind":"resultat","role":"sender"}`, 1, "resultat"},
		{"unknown run", RecordsFile, `{"run":"r0009","time":"2026-01-02T03:04:05Z","flow":"f","kind":"result","role":"sender"}`, 1, `run "r0009" is not in runs.jsonl`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t)
			writeFile(t, dir, c.file, c.text)
			_, err := Load(dir)
			var le *LoadError
			if !errors.As(err, &le) || le.File != c.file || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load = %v, want a *LoadError for %s line %d containing %q", err, c.file, c.line, c.want)
			}
		})
	}
	dir := writeDir(t)
	os.Remove(filepath.Join(dir, RecordsFile))
	_, err := Load(dir)
	var le *LoadError
	if !errors.As(err, &le) || le.File != RecordsFile || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load without records = %v, want a *LoadError for %s wrapping ErrNotExist", err, RecordsFile)
	}
	if want := "results: records.jsonl: open"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(load(t, writeDir(t)))
	if len(s.Variants) != 2 || s.Variants[0].Name != "amptcp/cubic/l2-down" || s.Variants[1].Name != "kernel/cubic/l2-down" {
		t.Fatalf("variants %+v", s.Variants)
	}
	a, k := s.Variants[0], s.Variants[1]
	if a.Runs != 2 || len(a.Failed) != 0 || len(a.Flagged) != 1 || a.Flagged[0] != "r0003" {
		t.Errorf("amptcp = %+v, want 2 runs, r0003 flagged", a)
	}
	if k.Runs != 2 || len(k.Failed) != 1 || k.Failed[0] != "r0004" || len(k.Flagged) != 0 {
		t.Errorf("kernel = %+v, want 2 runs, r0004 failed", k)
	}
	var names []string
	for _, m := range s.Metrics {
		names = append(names, m.Name+" "+m.Unit)
	}
	if got, want := strings.Join(names, ", "), "completion 1 MiB s, goodput Mbit/s, jitter transfer ms, jitter saturate ms"; got != want {
		t.Fatalf("metrics %q, want %q", got, want)
	}
	// By hand: the client's completions (the earlier start) are 1 s and
	// 3 s for amptcp (median 2, one flagged), 2 s for kernel (r0004
	// failed and is left out); goodput 40 and 20 Mbit/s, and 30.
	check := func(m, v int, n int, median, mean float64, flagged int) {
		t.Helper()
		r := s.Metrics[m].Rows[v]
		if r.N != n || !near(r.Median, median) || !near(r.Mean, mean) || r.Flagged != flagged || r.CILow != nil {
			t.Errorf("%s of %s = %+v, want n %d, median %g, mean %g, %d flagged, no CI", s.Metrics[m].Name, r.Variant, r, n, median, mean, flagged)
		}
	}
	check(0, 0, 2, 2, 2, 1)
	check(0, 1, 1, 2, 2, 0)
	check(1, 0, 2, 30, 30, 1)
	check(1, 1, 1, 30, 30, 0)
	check(2, 0, 2, 1, 1, 1)
	check(3, 1, 1, 2, 2, 0)
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestFlowMeasures(t *testing.T) {
	recs := runRecords(t0, time.Second, 40, 30*time.Millisecond)
	series := results.Subflows(recs)
	if len(series) != 2 || series[1].Remote != "10.2.0.2:5001" {
		t.Fatalf("subflows %+v", series)
	}
	if spread, ok := results.RTTSpread(series); !ok || spread != 30*time.Millisecond {
		t.Errorf("RTT spread %v, %v, want 30ms", spread, ok)
	}
	// 500 kB per 100 ms: 40 Mbit/s, nine intervals between ten samples.
	xs, ys := series[0].Throughput(t0)
	if len(xs) != 9 || !near(xs[0], 10.2) || !near(ys[0], 40e6) {
		t.Errorf("throughput at %v: %v, want 9 points from 10.2 s at 40e6", xs, ys)
	}
	// The run's goodput: the saturated flow's; without it, the
	// transfer's 1 MiB in 1 s.
	if g := runGoodput(results.Flows(recs)); !near(g, 40e6) {
		t.Errorf("run goodput %g, want 40e6", g)
	}
	if g := runGoodput(results.Flows(recs[:2])); !near(g, 8<<20) {
		t.Errorf("run goodput of the transfer %g, want %d", g, 8<<20)
	}
}

func TestWriteText(t *testing.T) {
	res := load(t, writeDir(t))
	var b strings.Builder
	if err := WriteText(&b, res, Summarize(res)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Lab experiment: 4 runs of 2 variants (pm/cc/failure/...), 1 failed, 1 missed fidelity\n",
		"\ncompletion 1 MiB (s)\n  variant               n  median  95% CI of median  mean  runs  failed  flagged\n",
		"  amptcp/cubic/l2-down  2    2.00  n<6               2.00     2  0       1 !\n",
		"  kernel/cubic/l2-down  1    2.00  n<6               2.00     2  1       0\n",
		"  r0004 (kernel/cubic/l2-down): failed: lab up: lispd did not answer\n",
		"  r0003 (amptcp/cubic/l2-down): missed fidelity: l2: RTT 25ms of 20ms configured (1ms without the delays), 3.50 of 4.00 Mbit/s; p99 lateness 2ms\n",
		"kernel Linux 6.18.0, 2 CPUs, amptcp v0.1-test\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestWrite(t *testing.T) {
	res := load(t, writeDir(t))
	out := filepath.Join(t.TempDir(), "report")
	s, err := Write(res, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	b, err := os.ReadFile(filepath.Join(out, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Metrics) != len(s.Metrics) || back.Metrics[1].Rows[0].Median != 30 {
		t.Fatalf("summary.json: %v, %s", err, b)
	}
	page, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{
		"<h3>completion 1 MiB (s)</h3>",
		"<tr class=\"flagged\"><td>amptcp/cubic/l2-down</td><td>2</td>",
		"<tr class=\"flagged\"><td>r0003</td>",
		"MISSED: l2: RTT 25ms of 20ms configured",
		"<tr class=\"failed\"><td>r0004</td>",
		"<td>kernel</td><td>Linux 6.18.0</td>",
		"<td>repetitions</td><td>2</td>",
		"<summary>scenario file</summary><pre>name: demo\nrepetitions: 2\n</pre>",
		"<td>scenario</td><td>demo</td>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(html, "<tr class=\"flagged\"><td>r0001</td>") {
		t.Errorf("report.html flags r0001, whose fidelity was met")
	}
	// Every plot file is on the page, and each is a non-empty PNG.
	files, _ := filepath.Glob(filepath.Join(out, "*.png"))
	want := []string{"throughput-r0001.png", "links-r0001.png", "throughput-r0002.png", "cdf-completion-1-mib.png", "bars-completion-1-mib.png",
		"bars-goodput.png", "bars-jitter-transfer.png", "bars-jitter-saturate.png", "goodput-vs-rtt-spread.png"}
	if len(files) != len(want) {
		t.Errorf("plots %v, want %v", files, want)
	}
	for _, name := range want {
		if !strings.Contains(html, `<img src="`+name+`"`) {
			t.Errorf("report.html does not show %s", name)
		}
	}
	for _, f := range files {
		if !regexp.MustCompile(`<img src="` + regexp.QuoteMeta(filepath.Base(f)) + `"`).MatchString(html) {
			t.Errorf("report.html does not show %s", filepath.Base(f))
		}
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if bounds := img.Bounds(); bounds.Dx() < 100 || bounds.Dy() < 100 || !drawn(img) {
			t.Errorf("%s is %v and blank", f, bounds)
		}
	}
}

// drawn says whether img has lines on it: pixels of at least three
// colours.
func drawn(img image.Image) bool {
	colours := map[color.Color]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			colours[img.At(x, y)] = true
			if len(colours) >= 3 {
				return true
			}
		}
	}
	return false
}
