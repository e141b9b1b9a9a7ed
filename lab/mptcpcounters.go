package lab

import (
	"os"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/topo"
)

// hostsMPTCPCounters reads the MPTCP counters of each host of plan that
// are not zero; a host whose counters cannot be read is left out.
func hostsMPTCPCounters(plan *topo.Plan) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, n := range plan.Nodes {
		if n.Role != topo.RoleHost {
			continue
		}
		if c, err := nsMPTCPCounters(n.Namespace); err == nil && len(c) > 0 {
			out[n.Name] = c
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// nsMPTCPCounters reads the MPTCP counters of a namespace that are not
// zero.
func nsMPTCPCounters(ns string) (map[string]uint64, error) {
	var text []byte
	err := (&netns.NS{Name: ns}).Do(func() (err error) {
		// thread-self: /proc/net is the namespace of the process's first
		// thread, not of this one.
		text, err = os.ReadFile("/proc/thread-self/net/netstat")
		return err
	})
	if err != nil {
		return nil, err
	}
	return mptcpCounters(string(text)), nil
}

// mptcpCounters parses /proc/net/netstat's MPTcpExt lines (a line of
// names, then one of values) into the counters that are not zero.
func mptcpCounters(netstat string) map[string]uint64 {
	var names, values []string
	for line := range strings.Lines(netstat) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "MPTcpExt:" {
			continue
		}
		if names == nil {
			names = f[1:]
		} else {
			values = f[1:]
		}
	}
	out := map[string]uint64{}
	for i, name := range names {
		if i >= len(values) {
			break
		}
		if v, err := strconv.ParseUint(values[i], 10, 64); err == nil && v != 0 {
			out[name] = v
		}
	}
	return out
}
