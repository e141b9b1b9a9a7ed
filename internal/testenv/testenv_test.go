package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for a test so that Require's skip or failure can be
// observed instead of ending this test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skip(args ...any)          { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...) }

func TestRequire(t *testing.T) {
	for _, strict := range []string{"", "1"} {
		t.Run("strict="+strict, func(t *testing.T) {
			t.Setenv(RequireEnv, strict)
			r := &recorder{TB: t}
			Require(r, true, "unused")
			if r.skipped != "" || r.failed != "" {
				t.Fatalf("met requirement: skipped %q, failed %q", r.skipped, r.failed)
			}
			Require(r, false, "needs a widget")
			if strict == "1" {
				if !strings.Contains(r.failed, "needs a widget") || r.skipped != "" {
					t.Fatalf("strict: failed %q, skipped %q; want a failure naming the reason", r.failed, r.skipped)
				}
			} else if r.skipped != "needs a widget" || r.failed != "" {
				t.Fatalf("non-strict: skipped %q, failed %q; want a skip with the reason", r.skipped, r.failed)
			}
		})
	}
}

func TestPrefixFitsInterfaceNames(t *testing.T) {
	// Room for a suffix such as "-12-ab" within IFNAMSIZ-1 = 15 bytes.
	if len(Prefix) > 7 {
		t.Fatalf("Prefix %q is %d bytes, want at most 7", Prefix, len(Prefix))
	}
}

func TestLacks(t *testing.T) {
	config := "# comment\nCONFIG_NF_TABLES=y\nCONFIG_NF_TABLES_INET=m\n# CONFIG_NFT_CT is not set\nCONFIG_NFT_CT_X=y"
	got := lacks(config, "CONFIG_NF_TABLES", "CONFIG_NF_TABLES_INET", "CONFIG_NFT_CT", "CONFIG_NFT_CT_X")
	if want := []string{"CONFIG_NFT_CT"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lacks: %v, want %v", got, want)
	}
}
