package doctor

import (
	"cmp"
	"fmt"
	"io"
	"strings"
)

// WriteText writes the report for a reader: a line per check, and for
// each that is not OK who needs it and what to do; then a verdict.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Linux %s\n\n", cmp.Or(r.Kernel, "(release unknown)"))
	for _, c := range r.Checks {
		writeResult(&b, c, c.Status != OK)
	}
	missing, warnings := len(r.Missing()), len(r.Warnings())
	b.WriteString("\n")
	switch {
	case missing > 0:
		fmt.Fprintf(&b, "%s missing (and %s): see the fixes above.\n", plural(missing, "required item"), plural(warnings, "warning"))
	case warnings > 0:
		fmt.Fprintf(&b, "Everything required is here (%s).\n", plural(warnings, "warning"))
	default:
		b.WriteString("Everything is here.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// indent aligns the details under a check's finding.
const indent = "                     "

// writeResult writes one check's line and, with details, who needs it
// and the fix.
func writeResult(b *strings.Builder, c Result, details bool) {
	fmt.Fprintf(b, "%-8s %-11s %s\n", c.Status, c.Name, c.Found)
	if !details {
		return
	}
	fmt.Fprintf(b, "%sneeded by: %s\n", indent, c.For)
	if c.Fix != "" {
		fmt.Fprintf(b, "%sfix: %s\n", indent, c.Fix)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
