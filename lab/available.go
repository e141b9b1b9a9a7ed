package lab

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
)

// The kernel's lists of what it offers, the same in every namespace.
const (
	availableCC         = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	availableSchedulers = "/proc/sys/net/mptcp/available_schedulers"
)

// kernelOffers reads the kernel's lists, once per scenario: the
// congestion controls and the MPTCP schedulers it has now.
type kernelOffers struct {
	ccs, schedulers []string
}

func readKernelOffers() kernelOffers {
	read := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		return strings.Fields(string(b))
	}
	return kernelOffers{ccs: read(availableCC), schedulers: read(availableSchedulers)}
}

// unavailable says why a variant's runs cannot run on this machine (a
// congestion control or an MPTCP scheduler the kernel lacks, a binding
// lispd does not have), or "" when they can. Such runs are skipped, each
// with the reason, and the claims on them are not run.
func (k kernelOffers) unavailable(s *scenario.Scenario, v scenario.Variant, dir string) string {
	var why []string
	ccs := map[string]bool{}
	if name := v.Get(scenario.DimCC); name != "" {
		ccs[cc.KernelName(name)] = true // lia is amp_lia to the kernel
	}
	for _, p := range s.Plan(v) {
		for _, f := range p.Traffic {
			if f.CongestionControl != "" {
				ccs[f.CongestionControl] = true
			}
		}
	}
	for _, cc := range sortedNames(ccs) {
		if !slices.Contains(k.ccs, cc) {
			why = append(why, fmt.Sprintf("congestion control %s is not available (the kernel has %s)", cc, strings.Join(k.ccs, ", ")))
		}
	}
	if sch := v.Get(scenario.DimScheduler); sch != "" && !slices.Contains(k.schedulers, sch) {
		why = append(why, fmt.Sprintf("MPTCP scheduler %s is not available (the kernel has %s)", sch, strings.Join(k.schedulers, ", ")))
	}
	if b := v.Get(scenario.DimBinding); b != "" {
		// lispd's own configuration says whether it has the binding.
		if _, err := topo.Compile(s.TopologyFor(v), dir); err != nil {
			why = append(why, fmt.Sprintf("binding %s (mptcp-subflows: %s) is not available in lispd: %v", b, scenario.Bindings[b], strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")))
		}
	}
	return strings.Join(why, "; ")
}

func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
