package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/testnet"
)

// TestELPHopBits: with elp-bits as-sent, the P and S bits of ELP hops
// decide. Site b registers three ELPs: (r1, r2, xd) with r1 not strict,
// the same with r1 strict, and, for backup, (r3, xd) with r3 not to be
// probed. xs probes r1, r2 and xd, never r3. When r1 goes down, the
// first ELP goes around it (xs sends to r2 directly) and carries the
// traffic; the second, which must use r1, is down.
//
//	hostA -- xs ---- r1 -- r2 -- xd -- hostB
//	          |\________/       /
//	          ms \______ r3 ___/
func TestELPHopBits(t *testing.T) {
	n := testnet.New(t)
	hostA, xs, r1, r2, r3, xd, hostB, ms := n.Node("hosta"), n.Node("xs"), n.Node("r1"), n.Node("r2"), n.Node("r3"),
		n.Node("xd"), n.Node("hostb"), n.Node("ms")
	siteA := n.Link(hostA, xs, "10.1.0.1/24", "10.1.0.254/24")
	n.Link(xs, ms, "10.0.100.1/24", "10.0.100.2/24")
	xsR1 := n.Link(xs, r1, "10.0.1.1/24", "10.0.1.2/24")
	xsR2 := n.Link(xs, r2, "10.0.2.1/24", "10.0.2.2/24")
	r1R2 := n.Link(r1, r2, "10.0.3.1/24", "10.0.3.2/24")
	r2XD := n.Link(r2, xd, "10.0.4.1/24", "10.0.4.2/24")
	xsR3 := n.Link(xs, r3, "10.0.5.1/24", "10.0.5.2/24")
	r3XD := n.Link(r3, xd, "10.0.6.1/24", "10.0.6.2/24")
	siteB := n.Link(xd, hostB, "10.2.0.254/24", "10.2.0.1/24")
	hostA.AddRoute("default", "10.1.0.254")
	hostB.AddRoute("default", "10.2.0.254")
	ms.AddRoute("default", "10.0.100.1")
	xs.AddRoute("10.0.4.0/24", "10.0.2.2")
	xs.AddRoute("10.0.3.0/24", "10.0.2.2")
	for _, nd := range []*testnet.Node{r1, r2, r3} {
		nd.AddRoute("default", map[*testnet.Node]string{r1: "10.0.1.1", r2: "10.0.2.1", r3: "10.0.5.1"}[nd])
	}
	r1.AddRoute("10.0.2.0/24", "10.0.3.2")
	r1.AddRoute("10.0.4.0/24", "10.0.3.2")
	r3.AddRoute("10.0.4.0/24", "10.0.6.2")
	xd.AddRoute("default", "10.0.4.1")
	routers(xs, r1, r2, r3, xd, ms)
	startTunnelLispd(t, ms, "ms", `
roles: [map-server, map-resolver]
listen: ["10.0.100.2"]
control: {socket: "{sock}"}
map-server:
  sites:
    - {name: a, keys: [{id: 1, secret: "bits"}], eid-prefixes: [{prefix: 10.1.0.0/24}]}
    - {name: b, keys: [{id: 1, secret: "bits"}], eid-prefixes: [{prefix: 10.2.0.0/24}]}
`)
	const bits = ", elp-bits: as-sent"
	sockXS := startTunnelLispd(t, xs, "xs", xtrConfig(xs, siteA, []*testnet.Link{xsR1, xsR2, xsR3}, bits, "10.1.0.0/24", "bits",
		"[{address: 10.0.2.1, priority: 1, weight: 100}]"))
	ps := "{address: %s, probe: true, strict: true}"
	xd1, r2S := fmt.Sprintf(ps, "10.0.4.2"), fmt.Sprintf(ps, "10.0.2.2")
	sockXD := startTunnelLispd(t, xd, "xd", xtrConfig(xd, siteB, []*testnet.Link{r2XD, r3XD}, bits, "10.2.0.0/24", "bits", `
        - {elp: [{address: 10.0.1.2, probe: true}, `+r2S+`, `+xd1+`], priority: 1, weight: 50}
        - {elp: [`+fmt.Sprintf(ps, "10.0.1.2")+`, `+r2S+`, `+xd1+`], priority: 1, weight: 50}
        - {elp: [{address: 10.0.5.2, strict: true}, `+xd1+`], priority: 2, weight: 50}`))
	startTunnelLispd(t, r1, "r1", rtrConfig(r1, xsR1, r1R2))
	sockR2 := startTunnelLispd(t, r2, "r2", rtrConfig(r2, xsR2, r1R2, r2XD))
	sockR3 := startTunnelLispd(t, r3, "r3", rtrConfig(r3, xsR3, r3XD))
	waitFor(t, "both xTRs registered", func() bool {
		a, b := tunnelStatus(t, sockXS), tunnelStatus(t, sockXD)
		return a.XTR.MapServers[0].State == "registered" && b.XTR.MapServers[0].State == "registered"
	})
	if err := echoFlows(hostA, hostB, "10.2.0.1:7", 8); err != nil {
		t.Fatal(err)
	}
	// paths is xs's entry for site b: each path's hops as installed, up
	// or why not.
	paths := func() []string {
		var out []string
		for _, e := range tunnelStatus(t, sockXS).MapCache {
			if e.EIDPrefix != "10.2.0.0/24" {
				continue
			}
			for _, p := range e.Paths {
				hops := p.Expanded
				if hops == nil {
					for _, h := range p.Hops {
						hops = append(hops, h.Address)
					}
				}
				out = append(out, fmt.Sprintf("%s up=%v", strings.Join(hops, ">"), p.Up))
			}
		}
		return out
	}
	waitFor(t, "xs's paths up", func() bool {
		return slices.Equal(paths(), []string{"10.0.1.2>10.0.2.2>10.0.4.2 up=true", "10.0.1.2>10.0.2.2>10.0.4.2 up=true",
			"10.0.5.2>10.0.4.2 up=true"})
	})

	t.Run("P=0 hops get no probes", func(t *testing.T) {
		// The paths may be up before the first probes: the first
		// packets were held, not retransmitted a second later.
		var probed []string
		waitFor(t, "xs's probes of the P hops, answered", func() bool {
			probed = probed[:0]
			for _, p := range tunnelStatus(t, sockXS).Probes {
				probed = append(probed, p.Address)
			}
			return slices.Contains(probed, "10.0.1.2") && slices.Contains(probed, "10.0.2.2") &&
				slices.Contains(probed, "10.0.4.2") &&
				tunnelStatus(t, sockR2).Counters.Tunnel.RequestsAnswered["probe-other-eid"] > 0
		})
		if slices.Contains(probed, "10.0.5.2") {
			t.Errorf("xs probes r3, whose hop has no P bit: %v", probed)
		}
		r3c := tunnelStatus(t, sockR3).Counters.Tunnel.RequestsAnswered
		r2c := tunnelStatus(t, sockR2).Counters.Tunnel.RequestsAnswered
		if r3c["probe"]+r3c["probe-other-eid"] != 0 || r2c["probe-other-eid"] == 0 {
			t.Errorf("probes answered: r3 %v, r2 %v", r3c, r2c)
		}
	})

	t.Run("a down hop without S is gone around, one with S takes its path down", func(t *testing.T) {
		if err := xsR1.SetDown(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "xs to go around r1", func() bool {
			return slices.Equal(paths(), []string{"10.0.2.2>10.0.4.2 up=true", "10.0.1.2>10.0.2.2>10.0.4.2 up=false",
				"10.0.5.2>10.0.4.2 up=true"})
		})
		before, beforeR3 := rtrCounters(t, sockR2), rtrCounters(t, sockR3)
		for i := range 4 { // flows that would hash to either ELP of the best priority
			transfer(t, hostA, hostB, "10.1.0.1", "10.2.0.1", false, 1<<20+i)
		}
		if got := rtrCounters(t, sockR2)["rtr_path0_bytes"] - before["rtr_path0_bytes"]; got < 4<<20 {
			t.Errorf("r2 re-encapsulated %d bytes of 4 MiB on the first ELP", got)
		}
		if got := rtrCounters(t, sockR3)["rtr_reencapsulated"] - beforeR3["rtr_reencapsulated"]; got != 0 {
			t.Errorf("r3, on the backup ELP, re-encapsulated %d packets", got)
		}
		if err := xsR1.SetUp(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "r1 back on both", func() bool { return strings.HasPrefix(strings.Join(paths(), ","), "10.0.1.2>") })
	})
}
