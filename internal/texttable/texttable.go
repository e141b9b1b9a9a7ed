// Package texttable lays out the plain-text tables of the lab's reports:
// columns as wide as their widest cell, numbers to three significant
// digits.
package texttable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Format lays out rows in columns as wide as their widest cell (in
// runes), indented and apart by two spaces, right-aligned where right
// says so (nil: all left), without trailing spaces.
func Format(rows [][]string, right []bool) string {
	if len(rows) == 0 {
		return ""
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			line.WriteString("  ")
			if i < len(right) && right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}

// Number writes a value to three significant digits, without an exponent
// in the ranges of seconds, Mbit/s, ratios and ms.
func Number(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
