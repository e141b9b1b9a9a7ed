// Command lispd is the LISP daemon: the map-server, map-resolver, xtr and
// rtr roles, chosen by its configuration file.
//
//	lispd [-config FILE] [-check] [-cpus N]   run, or only validate the configuration
//	lispd [-config FILE] -check-kernel   check the kernel for its roles
//	lispd status [-socket PATH] [-json]
//	lispd -version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/metrics"
)

// DefaultConfig is where lispd looks for its configuration.
const DefaultConfig = "/etc/amptcp/lispd.yaml"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "status" {
		return runStatus(args[1:], stdout, stderr)
	}
	flags := flag.NewFlagSet("lispd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	cfgPath := flags.String("config", DefaultConfig, "configuration file")
	check := flags.Bool("check", false, "validate the configuration and exit")
	checkKernel := flags.Bool("check-kernel", false, "check that the kernel offers what the configuration's roles need, and exit")
	version := flags.Bool("version", false, "print the version and exit")
	cpus := flags.Int("cpus", 0, "use `N` CPUs: N loops serve each listen address (default: GOMAXPROCS, every CPU lispd may run on)")
	profiles := flags.String("profile", "", "debug: let the control socket start and stop CPU profiles, written into `DIR` (amptcp bench map-request --profile)")
	flags.Usage = func() {
		fmt.Fprintf(stderr, `usage: lispd [-config FILE] [-check | -check-kernel] [-cpus N]
       lispd status [-socket PATH] [-json]
       lispd -version

lispd runs the LISP roles its configuration names: map-server and
map-resolver (docs/mapping.md), xtr and rtr (docs/routers.md). It
answers on UDP 4342 and serves its status on a control socket (lispd
status). -check-kernel says whether this kernel offers what the roles
need: BPF and TCX for xtr and rtr, nothing special for the others
(amptcp doctor checks all of amptcp's needs).

`)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.String("lispd"))
		return 0
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "lispd: unexpected argument %q\n", flags.Arg(0))
		return 2
	}
	if *cpus < 0 {
		fmt.Fprintf(stderr, "lispd: -cpus %d: want a positive number of CPUs\n", *cpus)
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "lispd: %v\n", err)
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "%s: valid (roles %v)\n", *cfgPath, cfg.Roles)
		return 0
	}
	if *checkKernel {
		return runCheckKernel(cfg.Roles, stdout, stderr)
	}
	log := cfg.Log.Logger(stderr)
	var opts []daemon.Option
	if *cpus > 0 {
		runtime.GOMAXPROCS(*cpus)
		opts = append(opts, daemon.WithLoops(*cpus))
	}
	if *profiles != "" {
		opts = append(opts, daemon.WithProfiles(*profiles))
	}
	d, err := daemon.New(cfg, log, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "lispd: %v\n", err)
		return 1
	}
	metrics.Start(ctx, cfg.Metrics.Listen, log, metrics.Lispd(d.Counters))
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "lispd: %v\n", err)
		return 1
	}
	return 0
}
