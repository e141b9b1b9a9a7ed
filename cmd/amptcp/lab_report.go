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
		fmt.Fprint(stderr, `usage: amptcp lab report [-o REPORT_DIR] DIR

report reads the results of an experiment (DIR: meta.json, runs.jsonl,
records.jsonl), prints the medians per variant and metric with their 95 %
confidence intervals, and writes summary.json, the plots and report.html
into REPORT_DIR (default DIR/report); docs/lab.md ("Reports") says what
the numbers mean.

`)
	}
	out := flags.String("o", "", "the report's directory (default DIR/report)")
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
	return 0
}
