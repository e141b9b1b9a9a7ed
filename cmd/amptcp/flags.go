package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// parseFlags parses a command's flags. done says the command ends here,
// with status: 0 after -help, 2 after a bad flag (which the flag package
// has reported).
func parseFlags(flags *flag.FlagSet, args []string) (status int, done bool) {
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	return 0, false
}

// parseOnlyFlags is parseFlags for a command that takes no argument: one
// left is reported on stderr and ends it with status 2.
func parseOnlyFlags(flags *flag.FlagSet, args []string, stderr io.Writer) (status int, done bool) {
	if status, done := parseFlags(flags, args); done {
		return status, true
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "amptcp %s: unexpected argument %q\n", flags.Name(), flags.Arg(0))
		return 2, true
	}
	return 0, false
}

// parseInterleaved parses flags before and after the positional
// arguments, which it returns: `amptcp lig 10.1.1.1 -m mr` reads as the
// user meant. The flag package alone stops at the first non-flag.
func parseInterleaved(flags *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := flags.Parse(args); err != nil {
			return nil, err
		}
		if flags.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, flags.Arg(0))
		args = flags.Args()[1:]
	}
}
