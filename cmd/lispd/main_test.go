package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionAndUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "lispd ") {
		t.Errorf("-version = %d, %q", code, out.String())
	}
	errOut.Reset()
	if code := run([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "usage: lispd") {
		t.Errorf("-h = %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "no role yet") {
		t.Errorf("no arguments = %d, %q", code, errOut.String())
	}
}
