package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	yamlBlock  = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	secretFile = regexp.MustCompile(`secret-file: ([^\s,}\]]+)`)
)

// Every configuration shown in docs/ loads. Files it names under
// /etc/amptcp are created in a temporary directory instead.
func TestDocsExamplesLoad(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
			if !strings.Contains(m[1], "roles:") {
				continue // not a lispd configuration
			}
			found++
			dir := t.TempDir()
			cfg := strings.ReplaceAll(m[1], "/etc/amptcp/", dir+"/")
			for _, f := range secretFile.FindAllStringSubmatch(cfg, -1) {
				if err := os.WriteFile(f[1], []byte("a secret\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Parse([]byte(cfg))
			if err != nil {
				t.Errorf("%s: example does not load:\n%v", doc, err)
				continue
			}
			if c.MapServer != nil && len(c.MapServer.Sites) == 0 {
				t.Errorf("%s: example has a map-server without sites", doc)
			}
		}
	}
	if found == 0 {
		t.Fatal("no configuration example found in docs/")
	}
}
