package lab

import (
	"fmt"
	"sync/atomic"

	"github.com/amptcp/amptcp/internal/jsonl"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// recordWriter writes each record of a run as a line of records.jsonl
// (results.Record); it is a traffic.Recorder.
type recordWriter struct {
	*jsonl.Writer
	run atomic.Pointer[string]
}

func (w *recordWriter) Record(r traffic.Record) {
	var run string
	if id := w.run.Load(); id != nil {
		run = *id
	}
	w.Write(results.Record{Run: run, Record: r}, func() string { return fmt.Sprintf("record of flow %q", r.Flow) })
}

// startRun makes the following records the run's.
func (w *recordWriter) startRun(id string) { w.run.Store(&id) }
