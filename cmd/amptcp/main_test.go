package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func runCmd(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpListsCommands(t *testing.T) {
	code, out, _ := runCmd("", "--help")
	if code != 0 || !strings.Contains(out, "decode") || !strings.Contains(out, "version") {
		t.Fatalf("--help = %d, %q", code, out)
	}
	if code, _, errOut := runCmd(""); code != 2 || !strings.Contains(errOut, "Usage") {
		t.Errorf("no arguments = %d, %q; want usage on stderr and 2", code, errOut)
	}
	if code, _, errOut := runCmd("", "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command = %d, %q", code, errOut)
	}
	if code, out, _ := runCmd("", "--version"); code != 0 || !strings.HasPrefix(out, "amptcp ") {
		t.Errorf("--version = %d, %q", code, out)
	}
}

func TestDecodeVectorFromStdin(t *testing.T) {
	vector, err := os.ReadFile("../../lisp/testdata/vectors/msg-map-reply-elp.hex")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(string(vector), "decode")
	if code != 0 {
		t.Fatalf("decode = %d, %s", code, errOut)
	}
	for _, want := range []string{"Map-Reply", "flags [probe]", "[1000]10.2.0.0/16",
		"elp{192.0.2.10(P) -> 192.0.2.20(P,S) -> 198.51.100.1}"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDecodeArgumentsAndErrors(t *testing.T) {
	if code, out, _ := runCmd("", "decode", "-data", "c8abcdef", "0003e803"); code != 0 ||
		!strings.Contains(out, "nonce 0xabcdef") || !strings.Contains(out, "iid 1000") {
		t.Errorf("decode -data = %d, %q", code, out)
	}
	// A record count that lies is reported with the field and offset.
	code, _, errOut := runCmd("", "decode", "20000002 0000000000000000")
	if code != 1 || !strings.Contains(errOut, "records[0].record header at offset 12: short buffer") {
		t.Errorf("truncated message = %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd("", "decode", "1x"); code != 1 || !strings.Contains(errOut, "invalid byte") {
		t.Errorf("bad hex = %d, %q", code, errOut)
	}
}
