package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/amptcp/amptcp/metrics"
	"github.com/amptcp/amptcp/pm"
)

// DefaultPMConfig is where `amptcp pm` looks for its configuration.
const DefaultPMConfig = "/etc/amptcp/pm.yaml"

// runPM runs the path manager until SIGINT or SIGTERM, validates its
// configuration (-check), or shows a running one's state (status). Exit
// status: 0 on a clean stop, 1 when it cannot run or fails, 2 for bad
// arguments.
func runPM(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "status" {
		return runPMStatus(args[1:], stdout, stderr)
	}
	flags := flag.NewFlagSet("pm", flag.ContinueOnError)
	flags.SetOutput(stderr)
	cfgPath := flags.String("config", DefaultPMConfig, "configuration `FILE`")
	check := flags.Bool("check", false, "validate the configuration and exit")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp pm [-config FILE] [-check]
       amptcp pm status [-socket PATH] [-json]

Runs the A-MPTCP path manager in this network namespace: it switches the
namespace to the kernel's userspace path manager (and back on exit), and
gives each MPTCP connection, once established, the subflows of its
policy: amptcp (as many as the mapping system shows paths, on source
ports that put each on its own path at a port-sum xTR), subflows,
fullmesh, ndiffports, binder (a subflow per gateway of the site) or
default. It repairs subflows that break when their path comes back.
docs/pm.md describes the configuration.

`)
		flags.PrintDefaults()
	}
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	cfg, err := pm.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp pm: %v\n", err)
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "%s: valid (policy %s)\n", *cfgPath, cfg.Policy)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := cfg.Log.Logger(stderr)
	d, err := pm.New(cfg, pm.Deps{Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "amptcp pm: %v\n", err)
		return 1
	}
	metrics.Start(ctx, cfg.Metrics.Listen, log, metrics.PM(d.Counters))
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "amptcp pm: %v\n", err)
		return 1
	}
	return 0
}

// runPMStatus prints each connection of a running path manager: its plan
// and why, and its subflows with the path each takes.
func runPMStatus(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("pm status", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("socket", pm.DefaultControlSocket, "the path manager's control socket")
	asJSON := flags.Bool("json", false, "print the status as JSON")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp pm status [-socket PATH] [-json]

Shows what a running amptcp pm holds: each MPTCP connection, its plan
and why, and its subflows with the path each takes.

`)
		flags.PrintDefaults()
	}
	if status, done := parseFlags(flags, args); done {
		return status
	}
	st, err := pm.QueryStatus(*socket)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp pm status: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return 0
	}
	if err := st.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "amptcp pm status: %v\n", err)
		return 1
	}
	return 0
}
