package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/amptcp/amptcp/lab"
	"github.com/amptcp/amptcp/lab/live"
	"github.com/amptcp/amptcp/lab/scenario"
)

// runLabRun is `amptcp lab run [-o DIR] [-dir DIR] [-bin DIR] [-live
// ADDR] SCENARIO`; the flags may also follow the scenario. Exit status:
// 0 every run good, 1 a run failed, the scenario is invalid or the live
// view cannot listen, 2 bad arguments, 130 interrupted.
func runLabRun(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("lab run", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts lab.RunOptions
	flags.StringVar(&opts.Lab.Dir, "dir", lab.DefaultDir, "the directory of the labs' state, configurations and logs")
	flags.StringVar(&opts.Lab.Bin, "bin", "", "the directory of lispd and amptcp (default: next to this program, else PATH)")
	flags.StringVar(&opts.Out, "o", "", "the results directory (default: results/<scenario>-<time>)")
	liveAddr := flags.String("live", "", "serve a live view of the runs on this address, like 127.0.0.1:8080")
	short := flags.Bool("short", false, "run the scenario's short version (its short: block): fewer, shorter runs")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp lab run [-o DIR] [-dir DIR] [-bin DIR] [-live ADDR] [-short] SCENARIO

Runs the experiment of a scenario file: its calibrations, then every
variant of its matrix, each repetition, interleaved, each run in a lab
built from the scenario's topology and taken down after it, with the
emulated paths' fidelity measured first; then it prints the scenario's
claims, PASS, FAIL or NOT RUN. Results go to DIR as JSON lines (amptcp
lab report summarises them); progress to stderr. It first checks that
this machine offers what the scenario needs (as amptcp doctor does) and
stops with what to fix if not; a variant whose congestion control or
MPTCP scheduler the kernel lacks is skipped, with the reason.
docs/lab.md describes scenario files, docs/reproduction.md the papers'.

`)
		flags.PrintDefaults()
	}
	files, err := parseInterleaved(flags, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case len(files) != 1:
		fmt.Fprintln(stderr, "usage: amptcp lab run [-o DIR] [-dir DIR] [-bin DIR] [-live ADDR] [-short] SCENARIO (docs/lab.md)")
		return 2
	}
	s, err := scenario.LoadVersion(files[0], *short)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lab run: %v\n", err)
		return 1
	}
	if opts.Out == "" {
		opts.Out = filepath.Join("results", s.Name+"-"+time.Now().Format("20060102-150405"))
	}
	opts.ScenarioFile, opts.Progress = files[0], stderr
	if *liveAddr != "" {
		view := live.New(s.Name)
		url, err := view.Listen(*liveAddr)
		if err != nil {
			fmt.Fprintf(stderr, "amptcp lab run: live view: %v\n", err)
			return 1
		}
		defer view.Close()
		fmt.Fprintf(stderr, "live view: %s\n", url)
		opts.Observer = view
	}
	if !preflight("lab run", labChecks(s.Topo, s), stderr) {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "%s: %d runs, results in %s\n", s.Name, len(s.Runs()), opts.Out)
	err = lab.RunScenario(ctx, s, opts)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "amptcp lab run: interrupted; the lab is down, the runs so far are in %s\n", opts.Out)
		return 130
	case err != nil:
		fmt.Fprintf(stderr, "amptcp lab run: %v\n", err)
		return 1
	}
	return 0
}
