package dataplane

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// WriteText prints the result: a table per profile of every variant and
// stream count, the targets, then why variants failed and where the
// numbers come from.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	capped := ""
	if r.Rate > 0 {
		capped = fmt.Sprintf(" capped at %g Gbit/s", r.Rate)
	}
	fmt.Fprintf(&b, "Data paths on veth chains: iperf3 TCP (%s)%s, %gs runs, medians of %d repetition%s taken in turns\n",
		r.Congestion, capped, r.Seconds, r.Repetitions, plural(r.Repetitions))
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "\nprofile %s: %s\n", p.Name, wrap(p.Description, 96, "  "))
		row := func(cols ...string) { b.WriteString(columns(tableCols, cols) + "\n") }
		row("", "", "", "", "", "server link", "underlay", "CPU/Gbit/s")
		row("variant", "streams", "Gbit/s", "(min-max)", "ratio", "Mpps", "B/pkt", "Mpps", "B/pkt", "machine", "own", "retr")
		for _, s := range r.Summaries {
			if s.Profile != p.Name {
				continue
			}
			if s.Runs == 0 {
				fmt.Fprintf(&b, "  %-9s %7d  %s\n", s.Variant, s.Streams, firstLine(s.Error))
				continue
			}
			ratio := ""
			if s.Ratio != nil {
				ratio = ratioText(*s.Ratio) + " × " + s.Reference
			}
			row(s.Variant, strconv.Itoa(s.Streams), gbps(s.Gbps), fmt.Sprintf("(%s-%s)", gbps(s.GbpsMin), gbps(s.GbpsMax)), ratio,
				mpps(s.Mpps), thousands(s.BytesPerPacket), mpps(s.UnderlayMpps), thousands(s.UnderlayBytesPerPacket),
				strconv.FormatFloat(s.CPUPerGbps, 'f', 3, 64), strconv.FormatFloat(s.OwnCPUPerGbps, 'f', 3, 64),
				strconv.FormatFloat(s.Retransmits, 'f', 0, 64))
			if s.Runs < r.Repetitions {
				fmt.Fprintf(&b, "  %-9s %7s  only %d of %d runs measured: %s\n", "", "", s.Runs, r.Repetitions, firstLine(s.Error))
			}
		}
		writePrograms(&b, r, p.Name)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(&b, "\ntargets (ratios: medians over the repetitions of the paired runs' goodputs; CPU: of their own CPU/Gbit/s)\n")
		for _, t := range r.Targets {
			measured := "-"
			if t.Ratio != nil {
				measured = ratioText(*t.Ratio) + " × " + variantRef(r, t.Variant)
				if t.Name == "CPU" {
					measured += "'s"
				}
			}
			if t.VsVXLAN != nil {
				measured += ", " + ratioText(*t.VsVXLAN) + " × vxlan"
			}
			verdict := t.Status
			if t.Reason != "" {
				verdict += " (" + t.Reason + ")"
			}
			line := columns(targetCols, []string{t.Profile, fmt.Sprintf("%d stream%s", t.Streams, plural(t.Streams)),
				t.Name + ":", t.Variant, t.Want, measured, verdict})
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	var failed []VariantResult
	for _, v := range r.Variants {
		if !v.Up {
			failed = append(failed, v)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nvariants that did not come up:\n")
		for _, v := range failed {
			fmt.Fprintf(&b, "  %s: %s\n", v.Name, strings.ReplaceAll(v.Error, "\n", "\n  "))
		}
	}
	fmt.Fprintf(&b, "\nvariants:\n")
	for _, v := range r.Variants {
		fmt.Fprintf(&b, "  %-9s %s\n", v.Name, v.Description)
	}
	fmt.Fprintf(&b, "Gbit/s is the receiver's goodput; ratio is to the reference measured in the same repetition.\n")
	fmt.Fprintf(&b, "Mpps and B/pkt: packets into the server's link and into r3 from the underlay, as the receiving ends count them\n")
	fmt.Fprintf(&b, "  (a GSO/GRO super-packet is one; on the underlay, before GRO).\n")
	fmt.Fprintf(&b, "CPU/Gbit/s: cores busy per Gbit/s of goodput, both iperf3 ends included: on the whole machine, and\n")
	fmt.Fprintf(&b, "  own: iperf3, lispd and ksoftirqd only (what other processes of a shared machine do is left out).\n")
	e := r.Environment
	var steal, total float64
	for _, run := range r.Runs {
		steal += run.CPU.Steal
		total += run.CPU.Busy + run.CPU.Idle
	}
	if total > 0 && steal/total > 0.05 {
		fmt.Fprintf(&b, "The host stole %.0f%% of the CPU time during the runs: the numbers are noisier than usual.\n", 100*steal/total)
	}
	fmt.Fprintf(&b, "pinning: %s; priority: %s\n", e.Pinning, e.Priority)
	fmt.Fprintf(&b, "%s (%s), Linux %s, %d CPUs, %s", e.Iperf3Version, e.Iperf3, e.Kernel, e.CPUs, e.Go)
	if e.Lispd != "" {
		fmt.Fprintf(&b, ", %s (%s)", e.LispdVersion, e.Lispd)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePrograms lists, for each variant and stream count of a profile
// that has them, lispd's programs' time per run and runs per second.
func writePrograms(b *strings.Builder, r *Result, profile string) {
	head := false
	for _, s := range r.Summaries {
		if s.Profile != profile || len(s.Programs) == 0 {
			continue
		}
		if !head {
			fmt.Fprintf(b, "  lispd's programs, ns per run (runs per second):\n")
			head = true
		}
		var parts []string
		for _, p := range s.Programs {
			parts = append(parts, fmt.Sprintf("%s %s %.0f (%s)", p.Router, p.Program, p.NsPerRun, perSecond(float64(p.Runs)/r.Seconds)))
		}
		fmt.Fprintf(b, "  %-9s %7d  %s\n", s.Variant, s.Streams, strings.Join(parts, ", "))
	}
}

// perSecond writes a rate with a k or M suffix.
func perSecond(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// column is a column of a text table: its width in characters (runes,
// since ×, ≥ and — are wider in bytes) and whether it is right-aligned.
type column struct {
	width int
	right bool
}

// The columns of the profiles' tables; the header above the packet
// rates spans two columns each.
var (
	tableCols = []column{{9, false}, {7, true}, {7, true}, {15, false}, {15, false},
		{6, true}, {7, true}, {7, true}, {7, true}, {7, true}, {6, true}, {6, true}}
	spanCols   = []column{{9, false}, {7, true}, {7, true}, {15, false}, {15, false}, {14, true}, {15, true}, {14, true}}
	targetCols = []column{{5, false}, {9, false}, {8, false}, {9, false}, {30, false}, {28, false}, {0, false}}
)

// columns lays out one row of a table, indented by two spaces, without
// trailing spaces. A header row with fewer cells uses spanCols.
func columns(cols []column, cells []string) string {
	if len(cells) == len(spanCols) && len(cells) < len(cols) {
		cols = spanCols
	}
	var b strings.Builder
	b.WriteString(" ")
	for i, c := range cells {
		pad := strings.Repeat(" ", max(0, cols[i].width-utf8.RuneCountInString(c)))
		b.WriteByte(' ')
		if cols[i].right {
			b.WriteString(pad + c)
		} else {
			b.WriteString(c + pad)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

func variantRef(r *Result, name string) string {
	if v := r.variant(name); v != nil {
		return v.Reference
	}
	return ""
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

// gbps writes a rate in Gbit/s to two decimals.
func gbps(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// wrap breaks s into lines of at most width bytes where it has spaces,
// starting the lines after the first with indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		if i > 0 && line+1+len(w) > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// mpps writes a packet rate in Mpps to three decimals.
func mpps(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// ratioText writes a ratio to two decimals.
func ratioText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// thousands writes v rounded, with thousands separated: 64,480.
func thousands(v float64) string {
	n := int64(v + 0.5)
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
