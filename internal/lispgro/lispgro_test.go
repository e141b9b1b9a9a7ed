package lispgro

import (
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestSupported(t *testing.T) {
	for release, want := range map[string]string{
		"6.18.44-fc-v669": "", "6.5.0": "", "7.0": "", "6.10-rc1": "",
		"6.4.16":        "older than 6.5",
		"5.15.0-91-gen": "older than 6.5",
		"linux":         "cannot read",
	} {
		err := Supported(release)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("Supported(%q) = %v, want %q", release, err, want)
		}
	}
}
