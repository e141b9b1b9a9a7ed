package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	benchpm "github.com/amptcp/amptcp/bench/pm"
	"github.com/amptcp/amptcp/internal/doctor"
)

var pmUsage = fmt.Sprintf(`pm builds, in network namespaces of its own (named amptcp-bpm-<pid>-*,
removed at the end, also on Ctrl-C), one network per path manager: a
client with two links of %d Mbit/s to a router, a server behind it.
An MPTCP connection from the client, kept busy by a saturating sender,
has a subflow on each link. The second path fails for --outage and
comes back, in one of two ways:
  link       the router's end of the link goes down and up (the client
             sees its carrier go)
  blackhole  the router drops what the server sends to the client's
             second address (nothing on the client tells)
The bench times, from the path's return, until every subflow carries
data again (acknowledges new bytes, as sock_diag shows), with:
  amptcp-pm  amptcp pm, policy fullmesh, the default repair settings
  kernel     the kernel's own path manager, with a subflow endpoint
The path managers and the failures take turns, --repetitions times. It
reports the median, p95 and maximum, and the targets as MET or MISSED:
amptcp pm repairs within %v (p95, and every repetition), sooner than
the kernel alone (medians). It needs root. Progress goes to stderr.

The defaults make %d repairs and take about %d minutes;
--repetitions 1 --failures link takes about 10 s.
`, benchpm.RateMbps, benchpm.TargetRepair,
	func() int { o := benchpm.Options{}; o.Validate(); return o.Measurements() }(),
	int(benchpm.Estimate(benchpm.Options{}).Minutes()+0.999))

// runBenchPM runs `amptcp bench pm`. Exit status: 0 when it measured (a
// missed target is a result), 1 when it could not, 2 for bad arguments.
func runBenchPM(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("bench pm", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts benchpm.Options
	jsonOut := flags.Bool("json", false, "print the result as one JSON object, with every repetition's numbers")
	flags.Var((*listFlag)(&opts.Variants), "variants", "measure these path managers, comma-separated `names` (default "+strings.Join(benchpm.VariantNames(), ",")+")")
	flags.Var((*listFlag)(&opts.Failures), "failures", "fail the path in these `ways`, comma-separated (default "+strings.Join(benchpm.FailureNames(), ",")+")")
	flags.IntVar(&opts.Repetitions, "repetitions", benchpm.DefaultRepetitions, "`N` repetitions of every path manager and failure, in turns")
	flags.DurationVar(&opts.Outage, "outage", benchpm.DefaultOutage, "keep the path failed for `D`")
	flags.DurationVar(&opts.Timeout, "timeout", benchpm.DefaultTimeout, "wait `D` at most for the subflows after the path's return")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: amptcp bench pm [flags]\n\n"+pmUsage+"\n")
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	// Zero means the default to Validate: refuse it here, where it was
	// given.
	if opts.Repetitions < 1 || opts.Outage <= 0 || opts.Timeout <= 0 {
		fmt.Fprintln(stderr, "amptcp bench pm: --repetitions, --outage and --timeout must be positive")
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "amptcp bench pm: %v\n", err)
		return 2
	}
	if !preflight("bench pm", []doctor.Check{doctor.Privileges(), doctor.Netns(), doctor.Veth(), doctor.MPTCP(), doctor.UserspacePM()}, stderr) {
		return 1
	}
	opts.Progress = func(line string) { fmt.Fprintln(stderr, line) }

	run := func(ctx context.Context) (*benchpm.Result, error) { return benchpm.Run(ctx, opts) }
	if _, ok := runBenchmark("pm", stdout, stderr, *jsonOut, run, benchpm.WriteText); !ok {
		return 1
	}
	return 0
}
