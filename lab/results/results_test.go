package results

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lab/traffic"
)

// What the runner writes, Load reads back, records filed under their run.
func TestLoadReadsWhatTheRunnerWrites(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	write := func(name string, vs ...any) {
		var b []byte
		for _, v := range vs {
			line, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b = append(append(b, line...), '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(MetaFile, Meta{Scenario: "s", Kernel: "Linux 6.18", CPUs: 2, Started: t0,
		Settings: Settings{Repetitions: 1, Runs: 2, Dimensions: []Dimension{{Name: "pm", Values: []string{"amptcp", "tcp"}}}}})
	write(RunsFile,
		Run{ID: "001", Variant: Variant{"pm": "amptcp", "cc": "cubic"}, Repetition: 1, Started: t0, Ended: t0.Add(time.Second),
			Events: []Event{{At: time.Second, AppliedAfter: time.Second + time.Millisecond, Link: "l2", Action: "down"}}},
		Run{ID: "002", Variant: Variant{"pm": "tcp", "cc": "cubic"}, Repetition: 1, Error: "up: no"})
	write(RecordsFile,
		Record{Run: "001", Record: traffic.Record{Time: t0, Flow: "f", Kind: traffic.KindResult, Role: traffic.Sender}},
		Record{Run: "002", Record: traffic.Record{Time: t0, Flow: "f", Kind: traffic.KindReceiver, Role: traffic.Receiver}})

	res, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Links) != 0 {
		t.Errorf("link samples %v without %s", res.Links, LinksFile)
	}
	write(LinksFile, LinkSample{Run: "001", Time: t0, Link: "l2", Direction: "a-to-b", DeliveredBytes: 1500},
		LinkSample{Run: "001", Time: t0.Add(100 * time.Millisecond), Link: "l2", Direction: "a-to-b", DeliveredBytes: 3000})
	if res, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if l := res.Links["001"]; len(l) != 2 || l[1].DeliveredBytes != 3000 || l[1].Direction != "a-to-b" {
		t.Errorf("link samples %+v", res.Links)
	}
	if res.Meta.Settings.Runs != 2 || len(res.Runs) != 2 || res.Run("002").Error != "up: no" ||
		len(res.Records["001"]) != 1 || res.Records["002"][0].Kind != traffic.KindReceiver {
		t.Errorf("loaded %+v", res)
	}
	r := res.Run("001")
	if r.Variant.Name() != "amptcp/cubic" || r.Events[0].Label() != "l2 down" || r.Origin() != t0 || r.Flagged() {
		t.Errorf("run 001: %+v", r)
	}

	// A link sample of a run runs.jsonl does not have names its line.
	write(LinksFile, LinkSample{Run: "001", Link: "l2"}, LinkSample{Run: "007", Link: "l2"})
	var le *LoadError
	if _, err := Load(dir); !errors.As(err, &le) || le.File != LinksFile || le.Line != 2 {
		t.Errorf("Load = %v, want a *LoadError for line 2 of %s", err, LinksFile)
	}
	os.Remove(filepath.Join(dir, LinksFile))

	// A record of a run runs.jsonl does not have names its line.
	write(RecordsFile, Record{Run: "001", Record: traffic.Record{Time: t0, Flow: "f", Kind: traffic.KindResult, Role: traffic.Sender}},
		Record{Run: "009", Record: traffic.Record{Time: t0, Flow: "f", Kind: traffic.KindResult, Role: traffic.Sender}})
	if _, err := Load(dir); !errors.As(err, &le) || le.File != RecordsFile || le.Line != 2 {
		t.Errorf("Load = %v, want a *LoadError for line 2 of %s", err, RecordsFile)
	}
}
