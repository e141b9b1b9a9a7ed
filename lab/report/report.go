package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// SummaryFile is the name of the summary's JSON in the report's directory.
const SummaryFile = "summary.json"

// Write makes the whole report of res in dir (created if need be):
// summary.json, the plots and report.html; it prints the text table to
// text (nil: nowhere) and returns the summary.
func Write(res *Results, dir string, text io.Writer) (*Summary, error) {
	s := Summarize(res)
	if text != nil {
		if err := WriteText(text, res, s); err != nil {
			return s, fmt.Errorf("report: print summary: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s, fmt.Errorf("report: %w", err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		return s, fmt.Errorf("report: encode summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), js.Bytes(), 0o644); err != nil {
		return s, fmt.Errorf("report: %w", err)
	}
	plots, err := WritePlots(dir, res, s)
	if err != nil {
		return s, err
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, res, s, plots); err != nil {
		return s, err
	}
	if err := os.WriteFile(filepath.Join(dir, HTMLFile), page.Bytes(), 0o644); err != nil {
		return s, fmt.Errorf("report: %w", err)
	}
	return s, nil
}
