package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/amptcp/amptcp/internal/hextext"
	"github.com/amptcp/amptcp/lisp"
)

// runDecode prints the LISP message or data header that hex spells, so
// that a capture or a log line can be read field by field.
func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("decode", flag.ContinueOnError)
	flags.SetOutput(stderr)
	data := flags.Bool("data", false, "decode a data header (UDP 4341) instead of a control message")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp decode [-data] [HEX...]

Decodes the UDP payload of a LISP control message (port 4342) or, with
-data, the data header at the front of an encapsulated packet (port 4341),
and prints its fields. The hex comes from the arguments or, if there are
none, standard input; spaces are ignored and '#' starts a comment.
`)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	text := strings.Join(flags.Args(), " ")
	if flags.NArg() == 0 {
		in, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "amptcp decode: read standard input: %v\n", err)
			return 1
		}
		text = string(in)
	}
	b, err := hextext.Decode(text)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp decode: %v\n", err)
		return 1
	}
	if *data {
		var h lisp.DataHeader
		if err := h.DecodeFromBytes(b); err != nil {
			fmt.Fprintf(stderr, "amptcp decode: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s (%d bytes of inner packet)\n", h.String(), len(b)-lisp.DataHeaderLen)
		return 0
	}
	m, err := lisp.Parse(b)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp decode: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, m)
	return 0
}
