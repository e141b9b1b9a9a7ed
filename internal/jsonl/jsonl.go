// Package jsonl writes values as JSON lines (one JSON document per
// line), from any goroutine: the results files of the lab and of its
// traffic.
package jsonl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Writer writes each value as a line on a buffered writer. The first
// error stops it and is kept for Flush to return, so that the writers of
// lines need not check each one.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

// NewWriter returns a Writer on w; call Flush before closing w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Write writes v as a line. describe, called only if v cannot be
// encoded, says what v is for the error ("record of flow x").
func (w *Writer) Write(v any, describe func() string) {
	b, err := json.Marshal(v)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if err != nil {
		w.err = fmt.Errorf("encode %s: %w", describe(), err)
		return
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		w.err = fmt.Errorf("write: %w", err)
	}
}

// Flush writes what is buffered and returns the first error of any Write
// or of the flush.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("write: %w", err)
		}
	}
	return w.err
}
