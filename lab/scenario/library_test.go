package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenarioLibrary loads every scenario of docs/scenarios, its full
// and its short version: each is valid, and each of the papers' has a
// short version and claims, every claim naming its figure.
func TestScenarioLibrary(t *testing.T) {
	files, err := filepath.Glob("../../docs/scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scenarios := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\ntopology: ") {
			continue // a topology
		}
		scenarios++
		full, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if full.ShortSpec.Kind == 0 {
			if len(full.Claims) > 0 {
				t.Errorf("%s: claims but no short version", f)
			}
			continue
		}
		short, err := LoadVersion(f, true)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(full.Claims) == 0 {
			t.Errorf("%s: a short version but no claims", f)
		}
		if n, m := len(short.Runs()), len(full.Runs()); n > m {
			t.Errorf("%s: the short version has %d runs, the full one %d", f, n, m)
		}
	}
	if scenarios < 2 {
		t.Errorf("%d scenarios in docs/scenarios", scenarios)
	}
}
