package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/internal/texttable"
	"github.com/amptcp/amptcp/lab/claims"
)

// WriteText prints the summary: a table per metric of every variant's
// median, its 95 % confidence interval and mean, the samples and the runs
// behind them; then the failed and flagged runs.
func WriteText(w io.Writer, res *Results, s *Summary) error {
	var b strings.Builder
	failed, flagged := 0, 0
	for _, v := range s.Variants {
		failed += len(v.Failed)
		flagged += len(v.Flagged)
	}
	fmt.Fprintf(&b, "Lab experiment: %d run%s of %d variant%s (pm/cc/failure/...), %d failed, %d missed fidelity\n",
		len(res.Runs), plural(len(res.Runs)), len(s.Variants), plural(len(s.Variants)), failed, flagged)
	for _, m := range s.Metrics {
		fmt.Fprintf(&b, "\n%s (%s)\n", m.Name, m.Unit)
		rows := [][]string{{"variant", "n", "median", "95% CI of median", "mean", "runs", "failed", "flagged"}}
		for i, r := range m.Rows {
			v := s.Variants[i]
			cells := []string{r.Variant, strconv.Itoa(r.N), "-", "-", "-", strconv.Itoa(v.Runs), strconv.Itoa(len(v.Failed)), strconv.Itoa(len(v.Flagged))}
			if r.N > 0 {
				cells[2], cells[3], cells[4] = texttable.Number(r.Median), ciText(r.Stats), texttable.Number(r.Mean)
			}
			if r.FailedFlows > 0 {
				cells[6] += fmt.Sprintf(" +%d flow%s", r.FailedFlows, plural(r.FailedFlows))
			}
			if r.Flagged > 0 {
				cells[7] += " !"
			}
			rows = append(rows, cells)
		}
		b.WriteString(texttable.Format(rows, []bool{false, true, true, false, true, true, false, false}))
	}
	var notes []string
	for _, run := range res.Runs {
		switch {
		case run.Skipped != "":
			notes = append(notes, fmt.Sprintf("  %s (%s): skipped: %s", run.ID, run.Variant.Name(), run.Skipped))
		case run.Error != "":
			notes = append(notes, fmt.Sprintf("  %s (%s): failed: %s", run.ID, run.Variant.Name(), firstLine(run.Error)))
		case run.Flagged():
			notes = append(notes, fmt.Sprintf("  %s (%s): missed fidelity: %s", run.ID, run.Variant.Name(), fidelityText(run.Fidelity)))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nruns left out (skipped, failed) or flagged (missed fidelity, still counted):\n" + strings.Join(notes, "\n") + "\n")
	}
	for _, c := range res.Meta.Calibration {
		fmt.Fprintf(&b, "\ncalibration of %s %s: %s\n", c.Link, c.Param, c)
	}
	if s.ClaimsError != "" {
		fmt.Fprintf(&b, "\nclaims: %s\n", s.ClaimsError)
	}
	if len(s.Claims) > 0 {
		b.WriteString("\n")
		if err := claims.WriteTable(&b, s.Claims); err != nil {
			return err
		}
	}
	b.WriteString("\nn: samples (flows) from runs without an error; the interval is the median's, from order statistics\n")
	b.WriteString("  (none below 6 samples); failed +N flows: flows that ended with an error; flagged !: samples from\n")
	b.WriteString("  runs that missed the fidelity tolerances are included.\n")
	// The runner's kernel is uname's sysname, release, version and
	// machine: "Linux 6.18.0 #1 SMP ... x86_64".
	if m := res.Meta; m.Kernel != "" || m.Version != "" {
		fmt.Fprintf(&b, "kernel %s, %d CPUs, amptcp %s\n", m.Kernel, m.CPUs, m.Version)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the summary as indented JSON.
func WriteJSON(w io.Writer, s *Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// ciText writes a confidence interval as (low-high), or "n<6".
func ciText(s Stats) string {
	if s.CILow == nil {
		return "n<6"
	}
	return "(" + texttable.Number(*s.CILow) + "-" + texttable.Number(*s.CIHigh) + ")"
}

// fidelityText says which paths missed, and the emulator's lateness.
func fidelityText(f *Fidelity) string {
	var parts []string
	for _, p := range f.Paths {
		if !p.OK {
			parts = append(parts, p.String())
		}
	}
	parts = append(parts, "p99 lateness "+f.LatenessP99.String())
	return strings.Join(parts, "; ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
