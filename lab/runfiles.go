package lab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// recordWriter writes each record of a run as a line of records.jsonl
// (results.Record); it is a traffic.Recorder.
type recordWriter struct {
	mu  sync.Mutex
	run string
	w   *bufio.Writer
	err error
}

func (w *recordWriter) Record(r traffic.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	b, err := json.Marshal(results.Record{Run: w.run, Record: r})
	if err == nil {
		_, err = w.w.Write(append(b, '\n'))
	}
	if err != nil {
		w.err = fmt.Errorf("write record of flow %q: %w", r.Flow, err)
	}
}

// startRun makes the following records the run's.
func (w *recordWriter) startRun(id string) {
	w.mu.Lock()
	w.run = id
	w.mu.Unlock()
}

func (w *recordWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}
