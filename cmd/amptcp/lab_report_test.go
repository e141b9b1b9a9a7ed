package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabReport(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"meta.json": `{"scenario":"name: demo","kernel":"6.18.0","cpus":2,"version":"test","started":"2026-01-02T03:04:05Z","settings":{}}`,
		"runs.jsonl": `{"run":"r0001","variant":{"pm":"amptcp","cc":"cubic","failure":"none"},"repetition":1,` +
			`"started":"2026-01-02T03:04:05Z","ended":"2026-01-02T03:04:10Z","error":""}` + "\n",
		"records.jsonl": `{"run":"r0001","time":"2026-01-02T03:04:07Z","flow":"file","kind":"result","role":"receiver",` +
			`"bytes_received":1048576,"protocol":"mptcp","cc":"cubic","flow_kind":"transfer","start":"2026-01-02T03:04:05Z","completion_ns":1500000000}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"lab", "report", dir}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("lab report: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"completion 1 MiB (s)", "  amptcp/cubic/none  1    1.50  n<6", "report: " + filepath.Join(dir, "report", "report.html")} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"report.html", "summary.json", "bars-completion-1-mib.png"} {
		if _, err := os.Stat(filepath.Join(dir, "report", name)); err != nil {
			t.Error(err)
		}
	}

	// -o elsewhere; a broken records file names its line.
	other := filepath.Join(t.TempDir(), "elsewhere")
	stdout.Reset()
	if code := run([]string{"lab", "report", "-o", other, dir}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("lab report -o: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(other, "report.html")); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "records.jsonl"), []byte(files["records.jsonl"]+"{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run([]string{"lab", "report", dir}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "records.jsonl line 2") {
		t.Errorf("lab report of a broken file: exit %d, %q; want 1 and the file and line", code, stderr.String())
	}
	if code := run([]string{"lab", "report"}, nil, &stdout, &stderr); code != 2 {
		t.Errorf("lab report without DIR: exit %d, want 2", code)
	}
}

// writeSweep writes a results directory of one run per pm at the point
// owd45, each an upload of goodput Mbit/s in 1 s.
func writeSweep(t *testing.T, goodput map[string]float64) string {
	t.Helper()
	dir := t.TempDir()
	var runs, recs strings.Builder
	i := 0
	for pm, g := range goodput {
		i++
		id := fmt.Sprintf("r%04d", i)
		fmt.Fprintf(&runs, `{"run":%q,"variant":{"pm":%q,"failure":"owd45"},"repetition":1,"started":"2026-01-02T03:04:05Z","ended":"2026-01-02T03:04:10Z"}`+"\n", id, pm)
		fmt.Fprintf(&recs, `{"run":%q,"time":"2026-01-02T03:04:06Z","flow":"bulk","kind":"connection","role":"sender","subflows":4}`+"\n", id)
		fmt.Fprintf(&recs, `{"run":%q,"time":"2026-01-02T03:04:07Z","flow":"bulk","kind":"result","role":"receiver","bytes_received":%d,`+
			`"protocol":"mptcp","cc":"cubic","flow_kind":"saturate","start":"2026-01-02T03:04:06Z","completion_ns":1000000000}`+"\n", id, int(g*1e6/8))
	}
	for name, text := range map[string]string{
		"meta.json":     `{"scenario":"name: sweep","kernel":"6.18.0","cpus":2,"version":"test","started":"2026-01-02T03:04:05Z","settings":{}}`,
		"runs.jsonl":    runs.String(),
		"records.jsonl": recs.String(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lab report -hol evaluates the head-of-line sweep: exit 0 where rule 1
// holds its own against the best subset, 1 where it does not.
func TestLabReportHoL(t *testing.T) {
	subsets := writeSweep(t, map[string]float64{"subflows 1": 19, "subflows 2": 37, "subflows 3": 50, "subflows 4": 53})
	for rule, want := range map[float64]int{51: 0, 30: 1} {
		var stdout, stderr strings.Builder
		dir := writeSweep(t, map[string]float64{"amptcp": rule})
		code := run([]string{"lab", "report", "-hol", subsets, dir}, nil, &stdout, &stderr)
		if code != want || !strings.Contains(stdout.String(), "head-of-line sweep") || !strings.Contains(stdout.String(), "owd45") {
			t.Errorf("rule 1 at %v Mbit/s: exit %d, want %d:\n%s%s", rule, code, want, stdout.String(), stderr.String())
		}
	}
}
