package lab

import (
	"strings"
	"testing"
)

// TestUnavailableVariants: a variant whose congestion control, MPTCP
// scheduler or binding this machine lacks is skipped with the reason,
// naming what the kernel has; the others run.
func TestUnavailableVariants(t *testing.T) {
	s := loadRunScenario(t, "avail", `name: NAME
topology: lab.yaml
flows: [{name: f, from: client, to: server, kind: saturated, duration: 1s}]
variants:
  cc: [cubic, olia]
  scheduler: [default, redundant]
  binding: [stateless, stateful]
`)
	dir := t.TempDir()
	k := kernelOffers{ccs: []string{"reno", "cubic", "bbr"}, schedulers: []string{"default"}}
	got := map[string]string{}
	for _, v := range s.Variants.Matrix() {
		got[v.String()] = k.unavailable(s, v, dir)
	}
	for _, variant := range []string{"cc=cubic scheduler=default binding=stateless", "cc=cubic scheduler=default binding=stateful"} {
		if why := got[variant]; why != "" {
			t.Errorf("%s: %q, want it to run", variant, why)
		}
	}
	for variant, want := range map[string]string{
		"cc=olia scheduler=default binding=stateless":    "congestion control amp_olia is not available (the kernel has reno, cubic, bbr)",
		"cc=cubic scheduler=redundant binding=stateless": "MPTCP scheduler redundant is not available (the kernel has default)",
	} {
		if !strings.Contains(got[variant], want) {
			t.Errorf("%s: %q, want %q", variant, got[variant], want)
		}
	}
}
