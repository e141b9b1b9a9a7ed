package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/amptcp/amptcp/lab/report"
)

// runLabReport summarises an experiment's results directory: the table
// on stdout, summary.json, the plots and report.html in the report's
// directory. Exit status: 0 done, 1 failed, 2 bad arguments.
func runLabReport(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lab report", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp lab report [-o REPORT_DIR] [-hol SUBSETS_DIR] DIR

report reads the results of an experiment (DIR: meta.json, runs.jsonl,
records.jsonl), prints the medians per variant and metric with their 95 %
confidence intervals, and writes summary.json, the plots and report.html
into REPORT_DIR (default DIR/report); docs/lab.md ("Reports") says what
the numbers mean.

With -hol, DIR holds the results of docs/scenarios/te-hol-sweep.yaml (or
another scenario of the sweep with a head-of-line rule on, such as
te-hol-sweep-capacity.yaml) and SUBSETS_DIR those of
te-hol-sweep-subsets.yaml: report prints, at each point of the sweep, the
goodput with the te role's set and with each subset of the ELPs, and
whether the set is not below the best subset (docs/te.md, "Head-of-line
protection"); it exits 1 where it is.

`)
	}
	out := flags.String("o", "", "the report's directory (default DIR/report)")
	hol := flags.String("hol", "", "the results of te-hol-sweep-subsets.yaml, to evaluate DIR's sweep against")
	if status, done := parseFlags(flags, args); done {
		return status
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return 2
	}
	dir := flags.Arg(0)
	if *out == "" {
		*out = filepath.Join(dir, "report")
	}
	res, err := report.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lab report: %v\n", err)
		return 1
	}
	if _, err := report.Write(res, *out, stdout); err != nil {
		fmt.Fprintf(stderr, "amptcp lab report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(*out, report.HTMLFile))
	if *hol != "" {
		return labReportHoL(res, *hol, stdout, stderr)
	}
	return 0
}

// holTolerance is how far below the best subset the rule may be and the
// claim still hold, when the best has no wider 95 % interval: runs on a
// shared machine vary by that much.
const holTolerance = 0.1

// labReportHoL evaluates the head-of-line sweep of res against the
// subsets' results in dir.
func labReportHoL(res *report.Results, dir string, stdout, stderr io.Writer) int {
	subsets, err := report.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lab report: %v\n", err)
		return 1
	}
	pts, err := report.HoLSweep(res, subsets, holTolerance)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lab report: head-of-line sweep: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "\nhead-of-line sweep: goodput (Mbit/s, medians), the te role's sets against the first N ELPs")
	report.WriteHoL(stdout, pts)
	for _, p := range pts {
		if !p.Holds {
			return 1
		}
	}
	return 0
}
