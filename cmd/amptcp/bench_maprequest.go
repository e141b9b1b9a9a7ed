package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/amptcp/amptcp/bench/maprequest"
	"github.com/amptcp/amptcp/internal/udpbatch"
)

// runBench runs a benchmark of lispd. Exit status: 0 when it ran (a
// missed target is a result, not a failure), 1 when it could not run, 2
// for bad arguments.
func runBench(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprint(w, `usage: amptcp bench map-request [--json] [--prefixes N] [--duration D] [--window W] [--lispd PATH] [--keep]
                                [--server-cpus N] [--profile DIR]
       amptcp bench dataplane [--json] [--variants LIST] [--profiles LIST] [--streams LIST]
                              [--duration D] [--repetitions N] [--congestion CC] [--lispd PATH] [--keep]
                              (amptcp bench dataplane --help for its flags)
       amptcp bench pm [--json] [--variants LIST] [--failures LIST] [--repetitions N]
                       [--outage D] [--timeout D]
       amptcp bench first-packet [--json] [--eids N] [--resolver-rtt D] [--path-rtt D] [--miss hold|drop]
                              (amptcp bench first-packet --help for its flags)

map-request starts a lispd of its own as map-server and map-resolver on
127.0.0.1, registers N prefixes with Map-Registers signed with
HMAC-SHA-256, refreshes them all (the same Map-Registers again, as ETRs
do every minute), then sends it Encapsulated Map-Requests over loopback UDP:
as fast as it answers, then at half that rate to measure latency. It
reports each performance target as MET or MISSED against a reference
measured in the same run: a UDP server doing lispd's batched I/O and
nothing else. lispd and the reference run on one CPU (GOMAXPROCS=1), or
N with --server-cpus N (lispd -cpus N, requests from many addresses),
the generator on another, all at nice -20 when allowed (as root).
Progress goes to stderr. The defaults take about a minute; --prefixes 10000
--duration 1s takes a few seconds. --profile DIR leaves lispd's CPU
profile, execution trace and allocations of each phase in DIR.
`)
		fmt.Fprint(w, "\n"+dataplaneUsage+"\n"+firstPacketUsage)
		fmt.Fprint(w, "\n"+pmUsage)
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "map-request":
		return runBenchMapRequest(args[1:], stdout, stderr, usage)
	case "dataplane":
		return runBenchDataplane(args[1:], stdout, stderr)
	case "pm":
		return runBenchPM(args[1:], stdout, stderr)
	case "first-packet":
		return runBenchFirstPacket(args[1:], stdout, stderr)
	case "echo-server": // the reference server, which map-request starts
		return runEchoServer(args[1:], stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "amptcp bench: unknown benchmark %q (map-request, dataplane, pm, first-packet)\n", args[0])
	return 2
}

// writeBenchResult prints a bench's result: as one indented JSON object
// with --json, else as text.
func writeBenchResult(w io.Writer, asJSON bool, res any, text func(io.Writer) error) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return text(w)
}

// runBenchmark runs a benchmark until it ends or is interrupted (SIGINT,
// SIGTERM), prints its result (JSON or text) and its error; ok reports
// whether it ran without one.
func runBenchmark[R any](name string, stdout, stderr io.Writer, asJSON bool,
	run func(context.Context) (*R, error), text func(io.Writer, *R) error) (res *R, ok bool) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx)
	if res != nil {
		err = errors.Join(err, writeBenchResult(stdout, asJSON, res, func(w io.Writer) error { return text(w, res) }))
	}
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench %s: %v\n", name, err)
		return res, false
	}
	return res, true
}

func runBenchMapRequest(args []string, stdout, stderr io.Writer, usage func(io.Writer)) int {
	flags := flag.NewFlagSet("bench map-request", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts maprequest.Options
	jsonOut := flags.Bool("json", false, "print the result as one JSON object")
	flags.IntVar(&opts.Prefixes, "prefixes", maprequest.DefaultPrefixes, "register `N` prefixes")
	flags.DurationVar(&opts.Duration, "duration", maprequest.DefaultDuration, "measure each rate for `D`, after a warm-up")
	flags.IntVar(&opts.Window, "window", maprequest.DefaultWindow, "keep `W` requests in flight when measuring the maximum rate")
	flags.StringVar(&opts.Lispd, "lispd", "", "the lispd binary `PATH` (default: next to amptcp, else in $PATH)")
	flags.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory with lispd's configuration and log")
	flags.IntVar(&opts.ServerCPUs, "server-cpus", 1, "give lispd and the reference `N` CPUs each (lispd -cpus N)")
	flags.StringVar(&opts.Profile, "profile", "", "write lispd's CPU and allocation profiles of each phase into `DIR`")
	flags.Usage = func() {
		usage(stderr)
		fmt.Fprintln(stderr)
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	if opts.Prefixes < 1 || opts.Duration <= 0 || opts.Window < 1 || opts.ServerCPUs < 1 {
		fmt.Fprintln(stderr, "amptcp bench map-request: --prefixes, --duration, --window and --server-cpus must be positive")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench map-request: find this executable for the reference server: %v\n", err)
		return 1
	}
	opts.Reference = []string{exe, "bench", "echo-server"}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "amptcp bench map-request: %v\n", err)
		return 2
	}
	opts.Progress = func(line string) { fmt.Fprintln(stderr, line) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := maprequest.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench map-request: %v\n", err)
		return 1
	}
	err = writeBenchResult(stdout, *jsonOut, res, func(w io.Writer) error { return maprequest.WriteText(w, res) })
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench map-request: %v\n", err)
		return 1
	}
	return 0
}

// runEchoServer is the reference server of `bench map-request`: it prints
// the address it listens on, then answers until its input ends (the bench
// holds the other end, so it never outlives the bench) or a signal.
func runEchoServer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("bench echo-server", flag.ContinueOnError)
	flags.SetOutput(stderr)
	listen := flags.String("listen", "127.0.0.1:0", "UDP `ADDRESS` to listen on")
	workers := flags.Int("workers", 1, "serve with `N` loops, each on a socket of its own (SO_REUSEPORT), as lispd -cpus N does")
	var sizes maprequest.EchoSizes
	flags.IntVar(&sizes.Reply, "reply-size", 0, "answer Map-Requests with datagrams of `N` bytes")
	flags.IntVar(&sizes.Notify, "notify-size", 0, "answer Map-Registers with datagrams of `N` bytes")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if err := sizes.Check(); err != nil {
		fmt.Fprintf(stderr, "amptcp bench echo-server: %v\n", err)
		return 2
	}
	addr, err := netip.ParseAddrPort(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench echo-server: -listen %s: %v\n", *listen, err)
		return 2
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "amptcp bench echo-server: -workers %d: want at least 1\n", *workers)
		return 2
	}
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	conns, err := udpbatch.ListenGroup(network, addr, *workers)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp bench echo-server: %v\n", err)
		return 1
	}
	for _, c := range conns { // lispd's buffers: the two queue alike when their CPU is taken
		if err := udpbatch.SetBuffers(c, udpbatch.ServerBuffer); err != nil {
			fmt.Fprintf(stderr, "amptcp bench echo-server: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, stdin)
		stop()
	}()
	go func() {
		<-ctx.Done()
		for _, c := range conns {
			c.Close()
		}
	}()
	fmt.Fprintln(stdout, conns[0].LocalAddr())
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { maprequest.ServeEcho(c, sizes) }) // sizes are checked: it ends when c is closed
	}
	wg.Wait()
	return 0
}
