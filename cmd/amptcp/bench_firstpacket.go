package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/amptcp/amptcp/bench/dataplane"
	"github.com/amptcp/amptcp/internal/doctor"
)

var firstPacketUsage = fmt.Sprintf(`first-packet builds, in network namespaces of its own (named
amptcp-bench-<pid>-*, removed at the end, also on Ctrl-C), the chain
client — r1 ~~ r3 — server with a mapping system ms ~~ r1, where ~~ are
emulated WAN links of --path-rtt and --resolver-rtt: lispd xTRs on r1
and r3, lispd map-server and map-resolver on ms. The server has --eids
EIDs of their own (a /32 each), so that each is a fresh resolution for
r1's ITR. For each, the client opens a TCP connection (cold), r1 asks
the map-resolver about the EID as its ITR does (a Map-Request's round
trip), and the client connects again (warm: the path's round trip). It
reports medians and 95th percentiles and the target as MET or MISSED:
a cold connection takes at most a Map-Request and a warm connection and
2 ms (medians), and no SYN is retransmitted. --miss drop shows what
holding the first packets saves. It needs root; progress goes to stderr.
The defaults take about %d seconds.
`, int(dataplane.EstimateFirstPacket(dataplane.FirstPacketOptions{}).Seconds()+0.999))

// runBenchFirstPacket runs `amptcp bench first-packet`. Exit status: 0
// when trials were measured (a missed target is a result), 1 when the
// bench failed, 2 for bad arguments.
func runBenchFirstPacket(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("bench first-packet", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts dataplane.FirstPacketOptions
	jsonOut := flags.Bool("json", false, "print the result as one JSON object, with every trial")
	flags.IntVar(&opts.EIDs, "eids", dataplane.DefaultEIDs, "connect to `N` fresh EIDs, one trial each")
	flags.DurationVar(&opts.ResolverRTT, "resolver-rtt", dataplane.DefaultResolverRTT, "round-trip time `D` between r1 and the map-resolver")
	flags.DurationVar(&opts.PathRTT, "path-rtt", dataplane.DefaultPathRTT, "round-trip time `D` between the xTRs")
	flags.StringVar(&opts.Miss, "miss", "hold", "r1's dataplane.miss: `hold` or drop")
	flags.DurationVar(&opts.ConnectTimeout, "connect-timeout", dataplane.DefaultConnectTimeout, "give each connection `D`")
	flags.DurationVar(&opts.SetupTimeout, "setup-timeout", dataplane.DefaultSetupTimeout, "give the chain `D` to come up")
	flags.StringVar(&opts.Lispd, "lispd", "", "the lispd binary `PATH` (default: next to amptcp, else in $PATH)")
	flags.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory with lispd's configurations and logs")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: amptcp bench first-packet [flags]\n\n"+firstPacketUsage+"\n")
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	if opts.EIDs < 1 || opts.ResolverRTT <= 0 || opts.PathRTT <= 0 || opts.ConnectTimeout <= 0 || opts.SetupTimeout <= 0 {
		fmt.Fprintln(stderr, "amptcp bench first-packet: --eids, --resolver-rtt, --path-rtt, --connect-timeout and --setup-timeout must be positive")
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "amptcp bench first-packet: %v\n", err)
		return 2
	}
	checks := []doctor.Check{doctor.Privileges(), doctor.Netns(), doctor.Veth(), doctor.TUN(), doctor.BPF(), doctor.TCX()}
	if !preflight("bench first-packet", checks, stderr) {
		return 1
	}
	opts.Progress = func(line string) { fmt.Fprintln(stderr, line) }
	run := func(ctx context.Context) (*dataplane.FirstPacketResult, error) {
		return dataplane.RunFirstPacket(ctx, opts)
	}
	if _, ok := runBenchmark("first-packet", stdout, stderr, *jsonOut, run, dataplane.WriteFirstPacketText); !ok {
		return 1
	}
	return 0
}
