package pm

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the result: a table of the repairs by failure and
// variant, the targets, the repetitions that were not measured, then what
// the names mean and where the numbers come from.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Time from a path's return until every subflow carries data again: a saturated MPTCP connection\n")
	fmt.Fprintf(&b, "over two paths of %.0f Mbit/s, the second failed for %gs; %d repetition%s, taken in turns\n\n",
		r.RateMbps, r.OutageSeconds, r.Repetitions, plural(r.Repetitions))
	row := func(cols ...string) {
		b.WriteString(strings.TrimRight(fmt.Sprintf("%-10s %-10s %9s %9s %9s  %s", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]), " ") + "\n")
	}
	row("failure", "variant", "median", "p95", "max", "recovered")
	last := ""
	for _, s := range r.Summaries {
		f := s.Failure
		if f == last {
			f = ""
		}
		last = s.Failure
		row(f, s.Variant, msText(s.MedianMS), msText(s.P95MS), msText(s.MaxMS), fmt.Sprintf("%d of %d", s.Recovered, s.Measured))
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(&b, "\ntargets\n")
		for _, t := range r.Targets {
			verdict := "MISSED"
			if t.Met {
				verdict = "MET"
			}
			line := fmt.Sprintf("  %-10s %-29s %-26s %-22s %s", t.Failure, t.Name+":", t.Want, t.Measured, verdict)
			b.WriteString(line + "\n")
		}
	}
	var failed []Sample
	for _, s := range r.Samples {
		if s.Error != "" {
			failed = append(failed, s)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nrepetitions not measured:\n")
		for _, s := range failed {
			fmt.Fprintf(&b, "  %s, %s, repetition %d: %s\n", s.Failure, s.Variant, s.Repetition, strings.ReplaceAll(s.Error, "\n", "\n    "))
		}
	}
	fmt.Fprintf(&b, "\nfailures:\n")
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  %-10s %s\n", f.Name, f.Description)
	}
	fmt.Fprintf(&b, "variants:\n")
	for _, v := range r.Variants {
		fmt.Fprintf(&b, "  %-10s %s\n", v.Name, v.Description)
	}
	fmt.Fprintf(&b, "A repetition that did not recover within %gs counts as that long; times are to within the 2 ms poll of sock_diag.\n", r.TimeoutSeconds)
	e := r.Environment
	fmt.Fprintf(&b, "%s, %s, Linux %s, %d CPUs\n", e.Version, e.Go, e.Kernel, e.CPUs)
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
