package claims

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/internal/texttable"
)

// WriteTable prints the claims as a table: each with its verdict, the
// value and its 95 % interval, the range, the figure and the samples,
// then what each compares and the reasons and notes.
func WriteTable(w io.Writer, rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	rows := [][]string{{"claim", "verdict", "value", "95% CI", "range", "n", "figure"}}
	pass, fail, notRun := 0, 0, 0
	for _, r := range rs {
		switch r.Verdict {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			notRun++
		}
		n := strconv.Itoa(r.N)
		if r.NOver > 0 {
			n += "/" + strconv.Itoa(r.NOver)
		}
		rows = append(rows, []string{r.ID, string(r.Verdict), r.ValueText(), r.IntervalText(), r.Range.String(), n, r.Figure})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Claims: %d passed, %d failed, %d not run\n", pass, fail, notRun)
	b.WriteString(texttable.Format(rows, nil))
	for _, r := range rs {
		line := fmt.Sprintf("  %s: %s (%s)", r.ID, r.What, r.Unit)
		if r.P != nil {
			line += fmt.Sprintf("; Mann-Whitney p %.3g, accepted %v", *r.P, *r.PRange)
		}
		if r.Says != "" {
			line += "\n      the paper: " + r.Says
		}
		if r.Reason != "" {
			label := "note"
			if r.Verdict == NotRun {
				label = "not run"
			}
			line += "\n      " + label + ": " + r.Reason
		}
		if r.Note != "" {
			line += "\n      " + r.Note
		}
		b.WriteString(line + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ValueText is the value to three significant digits, "-" for none.
func (r Result) ValueText() string {
	if r.Value == nil {
		return "-"
	}
	return texttable.Number(*r.Value)
}

// IntervalText is "(1.05-1.31)", "-" when there is none.
func (r Result) IntervalText() string {
	if r.Low == nil || r.High == nil {
		return "-"
	}
	return "(" + texttable.Number(*r.Low) + " to " + texttable.Number(*r.High) + ")"
}

// Set is the claims of one experiment, for a table of several.
type Set struct {
	Scenario string
	// Short says the scenario's short version ran.
	Short   bool
	Results []Result
}

// WriteSets prints the claims of several experiments as one table (as
// Markdown with markdown), then the count of each verdict.
func WriteSets(w io.Writer, sets []Set, markdown bool) error {
	head := []string{"scenario", "claim", "verdict", "value", "95% CI", "range", "n", "figure"}
	rows := [][]string{head}
	count := map[Verdict]int{}
	for _, s := range sets {
		name := s.Scenario
		if s.Short {
			name += " (short)"
		}
		for _, r := range s.Results {
			count[r.Verdict]++
			n := strconv.Itoa(r.N)
			if r.NOver > 0 {
				n += "/" + strconv.Itoa(r.NOver)
			}
			rows = append(rows, []string{name, r.ID, string(r.Verdict), r.ValueText(), r.IntervalText(), r.Range.String(), n, r.Figure})
		}
	}
	var b strings.Builder
	if markdown {
		for i, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			if i == 0 {
				b.WriteString(strings.Repeat("|---", len(r)) + "|\n")
			}
		}
	} else {
		b.WriteString(texttable.Format(rows, nil))
	}
	fmt.Fprintf(&b, "\n%d claims: %d passed, %d failed, %d not run\n", len(rows)-1, count[Pass], count[Fail], count[NotRun])
	_, err := io.WriteString(w, b.String())
	return err
}
