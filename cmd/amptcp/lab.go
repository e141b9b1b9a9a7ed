package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/amptcp/amptcp/lab"
	"github.com/amptcp/amptcp/lab/topo"
)

// runLab builds a lab from a topology file (up), takes it down (down) or
// shows it (status). Exit status: 0 done, 1 failed, 2 bad arguments.
func runLab(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprint(stderr, `usage: amptcp lab up [-dir DIR] [-bin DIR] FILE
       amptcp lab down [-dir DIR] NAME|FILE
       amptcp lab status [-dir DIR] [-json] NAME
       amptcp lab run [-o DIR] [-dir DIR] [-bin DIR] [-live ADDR] [-short] SCENARIO
       amptcp lab link [-dir DIR] NAME LINK down|up|set [-direction a-to-b|b-to-a]
                       [-rate R] [-delay D] [-loss P] [-queue Q]
       amptcp lab report [-o DIR] RESULTS
       amptcp lab claims [-markdown] RESULTS...

up builds the lab of a topology file (namespaces, links, routes, the
generated configurations) and starts lispd and amptcp pm in their roles;
down removes all of it, also after a crash; docs/lab.md describes the
topology format; link takes an emulated link down or up or changes it;
run runs a scenario's variants and repetitions and writes their results
(-live: and shows them in a browser as they run);
report summarises results into a table, plots and an HTML page;
claims prints the papers' claims of several results in one table.
up and run first check that this machine offers what the lab needs (as
amptcp doctor does) and stop with what to fix if not.

`)
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	verb := args[0]
	switch verb {
	case "report":
		return runLabReport(args[1:], stdout, stderr)
	case "claims":
		return runLabClaims(args[1:], stdout, stderr)
	case "run":
		return runLabRun(args[1:], stderr)
	case "linkd":
		return runLinkd(args[1:], stderr)
	case "link":
		return runLabLink(args[1:], stderr, usage)
	}
	flags := flag.NewFlagSet("lab "+verb, flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = usage
	var opts lab.Options
	flags.StringVar(&opts.Dir, "dir", lab.DefaultDir, "the directory of the labs' state, configurations and logs")
	bin := flags.String("bin", "", "the directory of lispd and amptcp (default: next to this program, else PATH)")
	asJSON := flags.Bool("json", false, "status: print JSON")
	if err := flags.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() != 1 {
		usage()
		return 2
	}
	arg := flags.Arg(0)
	opts.Bin = *bin
	opts.Progress = stderr
	switch verb {
	case "up":
		t, err := topo.Load(arg)
		if err != nil {
			fmt.Fprintf(stderr, "amptcp lab up: %v\n", err)
			return 1
		}
		if !preflight("lab up", labChecks(t, nil), stderr) {
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if _, err := lab.Up(ctx, t, arg, opts); err != nil {
			fmt.Fprintf(stderr, "amptcp lab up: %v\n", err)
			return 1
		}
		return 0
	case "down":
		name := arg
		if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.ContainsRune(arg, '/') {
			t, err := topo.Load(arg)
			if err != nil {
				fmt.Fprintf(stderr, "amptcp lab down: %v\n", err)
				return 1
			}
			name = t.Name
		}
		if err := lab.Down(name, opts); err != nil {
			fmt.Fprintf(stderr, "amptcp lab down: %v\n", err)
			return 1
		}
		return 0
	case "status":
		st, daemons, err := lab.Status(arg, opts)
		if err != nil {
			fmt.Fprintf(stderr, "amptcp lab status: %v\n", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(struct {
				*lab.State
				Daemons []lab.DaemonStatus `json:"daemons"`
			}{st, daemons})
			return 0
		}
		lab.WriteStatus(stdout, st, daemons)
		return 0
	}
	fmt.Fprintf(stderr, "amptcp lab: unknown command %q (up, down, status, link)\n", verb)
	return 2
}
