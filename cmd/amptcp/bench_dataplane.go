package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/bench/dataplane"
)

var dataplaneUsage = fmt.Sprintf(`dataplane builds, in network namespaces of its own (named
amptcp-bench-<pid>-*, removed at the end, also on Ctrl-C), one chain
client — r1 — [r2] — r3 — server per variant:
  plain     IP routing through two routers (r1, r3)
  plain-3   IP routing through three routers: the reference of lisp-rtr
  vxlan     kernel VXLAN between r1 and r3
  lisp      lispd xtr on r1 and r3 (ITR/ETR), a lispd map-server off r1
  lisp-rtr  lispd xtr on r1 and r3, lispd rtr on r2, ELPs through r2
(lispd's routers send each other LISP-GPE, which their kernels aggregate
with GRO) and, only when named and in the wire profile only:
  plain-xdp plain routing with a pass-through XDP program on r3 (what XDP
            costs on a veth, which copies each frame for it)
  lisp-xdp  lisp with RFC 9300 headers, decapsulated in XDP on r3
It waits until each variant passes traffic (lispd
answering and the mapping system resolving, for the lisp ones); one that
does not come up within --setup-timeout is reported with its reason and
lispd's log, and the others are measured. Then iperf3 sends TCP (--congestion, set
explicitly: the kernel's default is bbr) from the client to the server,
with each --streams count, for --duration, --repetitions times, the
variants taking turns, in two offload profiles: gso (veth defaults) and
wire (a NIC-like underlay: TSO and GSO off, GRO on, on the links between
routers). It
reports the median Gbit/s, the ratio to the reference in the same
repetitions, Mpps into the server's link, and CPU per Gbit/s (the whole
machine's, and the bench's own: iperf3, lispd, ksoftirqd), and the
performance targets as MET or MISSED: lisp ≥ 0.95 × plain and above
vxlan, lisp-rtr ≥ 0.95 × plain-3, each spending at most 1.1 × its
reference's own CPU per Gbit/s. --rate caps iperf3, to compare CPU on a
machine too busy for top speeds; --bpf-stats adds what lispd's programs
take per run on each router. It needs root and iperf3 (make deps), and
first checks for them and for what its variants need (as amptcp doctor
does). Progress goes to stderr.

The defaults make %d iperf3 runs and take about %d minutes;
--variants plain,vxlan --duration 1s --repetitions 1 takes about 15 s.
`, func() int { o := dataplane.Options{}; o.Validate(); return o.Runs() }(),
	int(dataplane.Estimate(dataplane.Options{}).Minutes()+0.999))

// runBenchDataplane runs `amptcp bench dataplane`. Exit status: 0 when
// some variant was measured (a missed target or a variant that did not
// come up is a result), 1 when none was or the bench failed, 2 for bad
// arguments.
func runBenchDataplane(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("bench dataplane", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts dataplane.Options
	jsonOut := flags.Bool("json", false, "print the result as one JSON object, with every repetition's numbers")
	flags.Var((*listFlag)(&opts.Variants), "variants", "measure these `variants`, comma-separated (default "+strings.Join(dataplane.VariantNames(), ",")+")")
	flags.Var((*listFlag)(&opts.Profiles), "profiles", "offload `profiles`, comma-separated (default "+strings.Join(dataplane.ProfileNames(), ",")+")")
	flags.Var((*intsFlag)(&opts.Streams), "streams", "numbers of parallel TCP `streams`, comma-separated (default 1,4)")
	flags.DurationVar(&opts.Duration, "duration", dataplane.DefaultDuration, "length `D` of each iperf3 run, whole seconds")
	flags.IntVar(&opts.Repetitions, "repetitions", dataplane.DefaultRepetitions, "`N` repetitions of every run, interleaved across variants")
	flags.Float64Var(&opts.Rate, "rate", 0, "cap what iperf3 sends at `R` Gbit/s over all streams, to compare CPU per Gbit/s (default: no cap)")
	flags.StringVar(&opts.Congestion, "congestion", dataplane.DefaultCongestion, "TCP congestion control `CC`")
	flags.DurationVar(&opts.SetupTimeout, "setup-timeout", dataplane.DefaultSetupTimeout, "give each variant `D` to come up")
	flags.StringVar(&opts.Lispd, "lispd", "", "the lispd binary `PATH` (default: next to amptcp, else in $PATH)")
	flags.StringVar(&opts.Iperf3, "iperf3", "", "the iperf3 binary `PATH` (default: in $PATH)")
	flags.BoolVar(&opts.Pin, "pin", true, "pin iperf3's client and server to two CPUs; --pin=false lets the scheduler place them")
	flags.BoolVar(&opts.BPFStats, "bpf-stats", false, "report what lispd's programs take per run on each router (the kernel's BPF run-time statistics, which add a little to each run)")
	flags.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory with lispd's configurations, the logs and iperf3's JSON")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: amptcp bench dataplane [flags]\n\n"+dataplaneUsage+"\n")
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	// Zero means the default to Validate: refuse it here, where it was
	// given.
	if opts.Duration <= 0 || opts.Repetitions < 1 || opts.SetupTimeout <= 0 {
		fmt.Fprintln(stderr, "amptcp bench dataplane: --duration, --repetitions and --setup-timeout must be positive")
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "amptcp bench dataplane: %v\n", err)
		return 2
	}
	if !preflight("bench dataplane", benchDataplaneChecks(&opts), stderr) {
		return 1
	}
	opts.Progress = func(line string) { fmt.Fprintln(stderr, line) }

	run := func(ctx context.Context) (*dataplane.Result, error) { return dataplane.Run(ctx, opts) }
	res, ok := runBenchmark("dataplane", stdout, stderr, *jsonOut, run, dataplane.WriteText)
	if !ok {
		return 1
	}
	for _, v := range res.Variants {
		if v.Up {
			return 0
		}
	}
	fmt.Fprintln(stderr, "amptcp bench dataplane: no variant came up")
	return 1
}

// listFlag is a comma-separated list of names.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = nil
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	if len(*l) == 0 {
		return errors.New("empty list")
	}
	return nil
}

// intsFlag is a comma-separated list of integers.
type intsFlag []int

func (l *intsFlag) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intsFlag) Set(s string) error {
	var names listFlag
	if err := names.Set(s); err != nil {
		return err
	}
	*l = nil
	for _, f := range names {
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		*l = append(*l, n)
	}
	return nil
}
