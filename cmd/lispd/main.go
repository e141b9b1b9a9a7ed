// Command lispd is the LISP daemon: the map-server, map-resolver,
// ddt-node, xtr and rtr roles, chosen by its configuration file.
//
//	lispd [-config FILE] [-check] [-cpus N]   run, or only validate the configuration
//	lispd [-config FILE] -check-kernel   check the kernel for its roles
//	lispd status [-socket PATH] [-json]
//	lispd reload [-socket PATH]     apply the configuration file's changes (SIGHUP)
//	lispd restart [-socket PATH]    restart, the data plane forwarding throughout (SIGUSR2)
//	lispd stop [-config FILE]       stop for good, the data plane too
//	lispd -version
//
// SIGTERM and SIGINT stop lispd, detaching its data plane unless
// dataplane.keep-on-exit keeps it for the next lispd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

// reexec replaces lispd with the program at its path (a new version
// after an upgrade), with the same arguments and PID: the restart of
// `lispd restart`.
var reexec = func() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, os.Args, os.Environ())
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return runStatus(args[1:], stdout, stderr)
		case "reload":
			return runReload(args[1:], stdout, stderr)
		case "restart":
			return runRestart(args[1:], stdout, stderr)
		case "stop":
			return runStop(args[1:], stdout, stderr)
		}
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
       lispd reload [-socket PATH]
       lispd restart [-socket PATH] [-timeout D]
       lispd stop [-config FILE] [-timeout D]
       lispd -version

lispd runs the LISP roles its configuration names: map-server and
map-resolver (docs/mapping.md), ddt-node (docs/ddt.md), xtr and rtr
(docs/routers.md). It answers on UDP 4342 and serves its status on a
control socket (lispd status). -check-kernel says whether this kernel
offers what the roles need: BPF and TCX for xtr and rtr, nothing special
for the others (amptcp doctor checks all of amptcp's needs).

lispd reload (or SIGHUP) applies what changed in the configuration file
and can change while lispd runs, and says what waits for a restart.
lispd restart (or SIGUSR2) runs lispd again from its file, a new version
after an upgrade, with the same PID: the data plane of the xtr and rtr
roles forwards throughout and the new lispd adopts it. SIGTERM and SIGINT
stop lispd and detach the data plane, unless dataplane.keep-on-exit
keeps it for the next lispd; lispd stop stops for good in any case.

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
	level := new(slog.LevelVar)
	log := cfg.Log.LoggerAt(stderr, level)
	opts := []daemon.Option{daemon.WithConfigFile(*cfgPath), daemon.WithLogLevel(level), daemon.WithCollectorTarget()}
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
	defer handleSignals(d, log)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	metrics.Start(ctx, cfg.Metrics.Listen, log, metrics.Lispd(d.Counters))
	err = d.Run(ctx)
	if errors.Is(err, daemon.ErrRestart) {
		cancel() // the metrics endpoint closes
		if err = reexec(); err != nil {
			log.Error("restart: cannot run lispd again; the data plane stays pinned for the next lispd", "error", err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "lispd: %v\n", err)
		return 1
	}
	return 0
}

// handleSignals reloads the configuration on SIGHUP and restarts on
// SIGUSR2, until the function it returns is called.
func handleSignals(d *daemon.Daemon, log *slog.Logger) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range sigs {
			if s == syscall.SIGHUP {
				d.Reload()
				continue
			}
			if err := d.Restart(); err != nil {
				log.Error("SIGUSR2", "error", err)
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(sigs)
		<-done
	}
}
