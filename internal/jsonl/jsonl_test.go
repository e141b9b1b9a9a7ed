package jsonl

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestLinesAndFirstError(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Write(map[string]int{"a": 1}, nil)
	w.Write([]string{"b"}, nil)
	if err := w.Flush(); err != nil || buf.String() != "{\"a\":1}\n[\"b\"]\n" {
		t.Fatalf("wrote %q, %v", buf.String(), err)
	}

	w = NewWriter(&buf)
	w.Write(math.Inf(1), func() string { return "the sample" })
	w.Write(1, nil) // not written after the error
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "encode the sample") {
		t.Errorf("Flush after a value JSON cannot hold: %v", err)
	}
	w = NewWriter(failingWriter{})
	w.Write(1, nil)
	if err := w.Flush(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Flush: %v; want the write's error", err)
	}
}
