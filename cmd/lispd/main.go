// Command lispd is the LISP daemon: the map-server, map-resolver, xTR and
// RTR roles, chosen by its configuration. This build has no role yet; it
// prints its version and usage.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/amptcp/amptcp/internal/buildinfo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lispd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	version := flags.Bool("version", false, "print the version and exit")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: lispd [-version]\n\n"+
			"lispd runs the LISP roles (map-server, map-resolver, xtr, rtr) that its\n"+
			"configuration names. This build implements no role yet.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.String("lispd"))
		return 0
	}
	flags.Usage()
	return 2
}
