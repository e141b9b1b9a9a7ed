package main

import (
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
