package hextext

import (
	"bytes"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	got, err := Decode("# title\n10 00 0001 # header\n\n0a0b0 # a byte split\nc\n")
	if err != nil || !bytes.Equal(got, []byte{0x10, 0x00, 0x00, 0x01, 0x0a, 0x0b, 0x0c}) {
		t.Fatalf("Decode = %x, %v", got, err)
	}
	for in, want := range map[string]string{"abc": "odd number", "zz": "line 1", "00\n0g": "line 2"} {
		if _, err := Decode(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
