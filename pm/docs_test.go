package pm

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// Every configuration of `amptcp pm` shown in docs/pm.md loads.
func TestDocsExamplesLoad(t *testing.T) {
	text, err := os.ReadFile("../docs/pm.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range yamlBlock.FindAllStringSubmatch(string(text), -1) {
		if !strings.Contains(m[1], "policy:") {
			continue // a fragment of lispd's configuration
		}
		found++
		c, err := Parse([]byte(m[1]))
		if err != nil {
			t.Errorf("example does not load:\n%s\n%v", m[1], err)
			continue
		}
		if c.Policy == PolicyAMPTCP && (c.AMPTCP.XTR == "" || len(c.LongLived.Whitelist) == 0 || c.Metrics.Listen == "") {
			t.Errorf("the amptcp example lost fields: %+v", c)
		}
	}
	if found < 2 {
		t.Fatalf("%d configurations found in docs/pm.md, want the client's and the server's", found)
	}
}
