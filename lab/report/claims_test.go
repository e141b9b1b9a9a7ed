package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// TestReportClaims: a results directory whose scenario states claims
// gets them evaluated again by the report: amptcp's mean completion of
// the file (1 and 3 s) over the kernel's (2 s; its other run failed) is
// 1, a PASS; a claim on a variant whose run was skipped is NOT RUN with
// the runner's reason, in the text, summary.json and the page.
func TestReportClaims(t *testing.T) {
	dir := writeDir(t)
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var meta Meta
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	meta.ScenarioSource = `name: demo
claims:
  - {id: 001-a, figure: Fig. 6, says: about as fast, metric: completion, flow: file, of: {pm: amptcp}, over: {pm: kernel}, range: [0.9, 1.1]}
  - {id: 001-b, figure: Fig. 6, metric: completion, of: {pm: olia}, over: {pm: kernel}, range: [0.9, 1.1]}
`
	if b, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, MetaFile, string(b))
	runs, err := os.ReadFile(filepath.Join(dir, RunsFile))
	if err != nil {
		t.Fatal(err)
	}
	skipped := `{"run":"r0005","repetition":1,"variant":{"pm":"olia","cc":"cubic","failure":"l2-down"},"started":"2026-01-02T03:09:05Z","ended":"2026-01-02T03:09:05Z","skipped":"congestion control amp_olia is not available"}` + "\n"
	writeFile(t, dir, RunsFile, string(runs)+skipped)

	res, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report")
	var text strings.Builder
	s, err := Write(res, out, &text)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Claims) != 2 || s.Claims[0].Verdict != "PASS" || s.Claims[1].Verdict != "NOT RUN" || s.Claims[0].Value == nil || *s.Claims[0].Value != 1 {
		t.Fatalf("claims %+v", s.Claims)
	}
	for _, want := range []string{"Claims: 1 passed, 0 failed, 1 not run", "001-a  PASS", "not run: congestion control amp_olia is not available",
		"r0005 (olia/cubic/l2-down): skipped: congestion control amp_olia"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text:\n%s\nno %q", text.String(), want)
		}
	}
	js, err := os.ReadFile(filepath.Join(out, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"verdict": "NOT RUN"`, `"reason": "congestion control amp_olia is not available"`, `"skipped": [`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("summary.json has no %s", want)
		}
	}
	page, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Claims</h2>", `<td class="PASS">PASS</td>`, `<td class="NOT">NOT RUN</td>`, "skipped: congestion control"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html has no %s", want)
		}
	}
}

// TestSequencePlot: a run's data sequence goes up to the bytes its
// receiver got (its subflows' lines and the events beside); a run
// without receiver samples has none.
func TestSequencePlot(t *testing.T) {
	recs := runRecords(t0, time.Second, 40, 10*time.Millisecond)
	for i := 1; i <= 10; i++ {
		recs = append(recs, traffic.Record{Time: t0.Add(10*time.Second + time.Duration(i)*100*time.Millisecond), Flow: "sat",
			Kind: traffic.KindReceiver, Role: traffic.Receiver, BytesReceived: uint64(i) * 1_000_000})
	}
	run := &Run{ID: "r1", Variant: amptcp, Started: t0, Events: []Event{{At: 10500 * time.Millisecond, Link: "l2", Action: "down"}}}
	res := &Results{Records: map[string][]traffic.Record{"r1": recs}}
	p, ok, err := sequencePlot(run, res)
	if err != nil || !ok {
		t.Fatalf("sequence plot: %v, %v", ok, err)
	}
	if p.Y.Max != 12.5 || !strings.Contains(p.Title.Text, "Data sequence, run r1") {
		t.Errorf("plot %q up to %v MB, want the run's and 10 MB received (and room for the legend)", p.Title.Text, p.Y.Max)
	}
	if err := p.Save(plotWidth, plotHeight, filepath.Join(t.TempDir(), "seq.png")); err != nil {
		t.Error(err)
	}
	if _, ok, _ := sequencePlot(run, &Results{Records: map[string][]traffic.Record{"r1": runRecords(t0, time.Second, 40, 0)}}); ok {
		t.Errorf("a plot without receiver samples")
	}
}
