// Command amptcp is the user's command for multipath TCP over a LISP
// overlay. Run `amptcp help` for its subcommands.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/amptcp/amptcp/internal/buildinfo"
)

// command is one subcommand: it gets the arguments after its name.
type command struct {
	name, args, summary string
	run                 func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = []command{
	{"bench", "BENCHMARK [opts]", "measure: map-request (lispd's mapping system), dataplane (data paths), pm (repairs), first-packet (connections to unresolved EIDs)", runBench},
	{"cc", "load|unload|status", "coupled congestion controls of multipath TCP (LIA, OLIA, BALIA, wVegas) in BPF", runCC},
	{"decode", "[-data] [HEX...]", "decode a LISP control message or data header written in hex", runDecode},
	{"doctor", "[-json]", "check that this machine's kernel and tools offer what amptcp needs", runDoctor},
	{"lab", "up|run|report ...", "build a lab from a topology file, run experiments in it, report them", runLab},
	{"lig", "[flags] EID", "ask a map-resolver for the mapping of an EID (LISP Internet Groper)", runLig},
	{"pm", "[-config FILE]", "run the A-MPTCP path manager; pm status shows its connections", runPM},
	{"version", "", "print the version", func(_ []string, _ io.Reader, stdout, _ io.Writer) int {
		fmt.Fprintln(stdout, buildinfo.String("amptcp"))
		return 0
	}},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "-version", "--version":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "amptcp: unknown command %q (amptcp help lists them)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `amptcp makes Multipath TCP use the paths a LISP overlay offers.

Usage:
  amptcp <command> [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %-18s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintf(w, "\n%s\n", buildinfo.String("amptcp"))
}
