package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/amptcp/amptcp/cc"
)

// runCC registers amptcp's congestion controls with the kernel (load),
// removes them (unload) or shows them (status). Exit status: 0 when all
// went well, 1 when something failed, 2 for bad arguments.
func runCC(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintf(stderr, `usage: amptcp cc load NAME...|all
       amptcp cc unload NAME...|all
       amptcp cc status [-json]

The coupled congestion controls of multipath TCP as BPF programs: %s
(and %s, a BPF wrapper of the kernel's Reno). A name may drop the amp_
prefix: amptcp cc load lia olia.

load registers them until unload, beyond this command (pinned in %s);
loading one that is loaded replaces its programs in one step, and
running connections keep theirs. A socket selects one with
TCP_CONGESTION; a network namespace may make it its default
(net.ipv4.tcp_congestion_control). unload unregisters them: running
connections go on with them, and the kernel frees them when the last
closes. status shows each, its connections with their subflows' windows,
RTTs and coupling terms, and its counters. docs/cc.md has the details.
`, joinNames(cc.Coupled), cc.Reno, cc.PinDir)
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	switch args[0] {
	case "load", "unload":
		names, err := ccNames(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "amptcp cc %s: %v\n", args[0], err)
			return 2
		}
		if args[0] == "load" {
			return ccLoad(names, stdout, stderr)
		}
		return ccUnload(names, stdout, stderr)
	case "status":
		return ccStatus(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage()
		return 0
	}
	fmt.Fprintf(stderr, "amptcp cc: unknown subcommand %q (load, unload, status)\n", args[0])
	return 2
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// ccNames resolves the arguments of load and unload.
func ccNames(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, errors.New("no congestion control named (all, or any of " + joinNames(cc.Names) + ")")
	}
	if len(args) == 1 && args[0] == "all" {
		return cc.Names, nil
	}
	var out []string
	for _, a := range args {
		n, err := cc.Canonical(a)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func ccLoad(names []string, stdout, stderr io.Writer) int {
	status := 0
	for _, n := range names {
		replaced, err := cc.Install(n)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "amptcp cc load: %v\n", err)
			status = 1
		case replaced:
			fmt.Fprintf(stdout, "%s: replaced (running connections keep the version they have)\n", n)
		default:
			fmt.Fprintf(stdout, "%s: registered\n", n)
		}
	}
	return status
}

func ccUnload(names []string, stdout, stderr io.Writer) int {
	status := 0
	for _, n := range names {
		still, err := cc.Uninstall(n)
		switch {
		case errors.Is(err, cc.ErrNotInstalled):
			fmt.Fprintf(stderr, "amptcp cc unload: %s: not loaded by amptcp cc load\n", n)
			status = 1
		case err != nil:
			fmt.Fprintf(stderr, "amptcp cc unload: %v\n", err)
			status = 1
		case still:
			fmt.Fprintf(stdout, "%s: unloaded; still registered by another program (amptcp pm or a lab run)\n", n)
		default:
			fmt.Fprintf(stdout, "%s: unregistered (connections using it keep it until they close)\n", n)
		}
	}
	return status
}

func ccStatus(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("cc status", flag.ContinueOnError)
	flags.SetOutput(stderr)
	asJSON := flags.Bool("json", false, "print the status as JSON")
	if status, done := parseOnlyFlags(flags, args, stderr); done {
		return status
	}
	st, err := cc.ReadStatus()
	if err != nil {
		fmt.Fprintf(stderr, "amptcp cc status: %v\n", err)
		if st == nil {
			return 1
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return 0
	}
	if err := st.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "amptcp cc status: %v\n", err)
		return 1
	}
	return 0
}
