package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
)

// runLabClaims prints the claims of one or more results directories as
// one table, evaluated again from each directory's records. Exit status:
// 0 done, 1 a directory could not be read, 2 bad arguments.
func runLabClaims(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lab claims", flag.ContinueOnError)
	flags.SetOutput(stderr)
	markdown := flags.Bool("markdown", false, "print a Markdown table")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp lab claims [-markdown] RESULTS...

claims evaluates the claims of each results directory's scenario (as
amptcp lab report does) and prints them all in one table: PASS, FAIL or
NOT RUN, the value, its 95 % interval and the range the paper accepts.
docs/reproduction.md explains each.

`)
	}
	if status, done := parseFlags(flags, args); done {
		return status
	}
	if flags.NArg() == 0 {
		flags.Usage()
		return 2
	}
	var sets []claims.Set
	for _, dir := range flags.Args() {
		res, err := results.Load(dir)
		if err != nil {
			fmt.Fprintf(stderr, "amptcp lab claims: %v\n", err)
			return 1
		}
		list, err := claims.FromScenario([]byte(res.Meta.ScenarioSource))
		if err != nil {
			fmt.Fprintf(stderr, "amptcp lab claims: %s: %v\n", dir, err)
			return 1
		}
		sets = append(sets, claims.Set{Scenario: res.Meta.Scenario, Short: res.Meta.Short, Results: claims.Evaluate(res, list)})
	}
	if err := claims.WriteSets(stdout, sets, *markdown); err != nil {
		fmt.Fprintf(stderr, "amptcp lab claims: %v\n", err)
		return 1
	}
	return 0
}
