package lab

import (
	"bufio"
	"encoding/json"
	"sync"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// jsonLines writes values as JSON lines, from any goroutine; the first
// error stops it and is flush's.
type jsonLines struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func (j *jsonLines) write(v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.writeLocked(v)
}

func (j *jsonLines) writeLocked(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		_, err = j.w.Write(append(b, '\n'))
	}
	j.err = err
}

func (j *jsonLines) flush() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = j.w.Flush()
	}
	return j.err
}

// recordWriter writes each record of a run as a line of records.jsonl
// (results.Record); it is a traffic.Recorder.
type recordWriter struct {
	jsonLines
	run string
}

func (w *recordWriter) Record(r traffic.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked(results.Record{Run: w.run, Record: r})
}

// startRun makes the following records the run's.
func (w *recordWriter) startRun(id string) {
	w.mu.Lock()
	w.run = id
	w.mu.Unlock()
}
