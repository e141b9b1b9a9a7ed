package daemon_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The tunnel routers in a network namespace of their own, where each
// lispd has port 4342 on an address of lo, as on a real network:
//
//	127.0.0.1  map-server, map-resolver and the xtr of site a (10.1.0.0/16),
//	           registered without proxy replies: through itself, as an RLOC
//	           and as the end of an ELP through the RTR
//	127.0.0.3  the xtr of site b (10.2.0.0/16), which resolves and probes
//	127.0.0.4  an RTR, which answers probes
const (
	msXTRConfig = `
roles: [map-server, map-resolver, xtr]
listen: [127.0.0.1]
control: {socket: "{sock}"}
map-server:
  sites:
    - {name: site-a, keys: [{id: 0, secret: "` + siteKey + `"}], eid-prefixes: [{prefix: 10.1.0.0/16}]}
    - {name: site-b, keys: [{id: 0, secret: "` + siteKey + `"}], eid-prefixes: [{prefix: 10.2.0.0/16}]}
map-resolver: {rate-limit: {per-second: 0}}
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], probe-interval: 0s}
xtr:
  database-mappings:
    - eid-prefix: 10.1.0.0/16
      locators:
        - {address: 127.0.0.1, priority: 1, weight: 50}
        - elp: [{address: 127.0.0.4, probe: true}, 127.0.0.1]
          priority: 1
          weight: 50
  map-servers: [{address: 127.0.0.1, secret: "` + siteKey + `"}]
`
	itrConfig = `
roles: [xtr]
listen: [127.0.0.3]
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], request-timeout: 500ms, probe-interval: 100ms, probe-misses: 2}
xtr:
  database-mappings: [{eid-prefix: 10.2.0.0/16, locators: [{address: 127.0.0.3}]}]
  map-servers: [{address: 127.0.0.1, secret: "` + siteKey + `", proxy-reply: true}]
`
	rtrConfig = `
roles: [rtr]
listen: [127.0.0.4]
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], probe-interval: 0s}
`
)

func TestTunnelRoutersInNamespace(t *testing.T) {
	top := t // what runs for the whole test is stopped at its end, not a subtest's
	nd := testnet.New(t).Node("lispd")
	dp1, dp3 := newFakeDP(), newFakeDP("127.0.0.3")
	ms := runDaemon(t, msXTRConfig, nd.Do, dp1.option())
	itr := runDaemon(t, itrConfig, nd.Do, dp3.option())
	dp4 := newFakeDP()
	rtr := runDaemon(t, rtrConfig, nd.Do, dp4.option())
	if dp4.opts.RTR == dp3.opts.RTR {
		t.Errorf("data plane options: RTR %v for the rtr, %v for the xtr", dp4.opts.RTR, dp3.opts.RTR)
	}

	waitFor(t, "both sites registered", func() bool {
		return len(ms.status(t).MapServer.Sites[0].Registrations) == 1 && len(ms.status(t).MapServer.Sites[1].Registrations) == 1
	})
	regA := ms.status(t).MapServer.Sites[0].Registrations[0]
	if regA.Proxy || len(regA.Locators) != 2 || regA.Locators[1].Address != "elp{127.0.0.4(P) -> 127.0.0.1}" ||
		regA.ETRs[0].Source != "127.0.0.1:4342" {
		t.Errorf("site a: %+v", regA)
	}

	t.Run("a forwarded Map-Request is answered by the xtr", func(t *testing.T) {
		dp3.miss("10.1.0.9")
		e := dp3.waitEntry(t, "10.1.0.0/16", "site a's mapping", func(dataplane.Entry) bool { return true })
		if len(e.Paths) != 2 || len(e.Paths[1].Hops) != 2 || e.Paths[1].Hops[0].Addr.String() != "127.0.0.4" ||
			!e.Paths[1].Hops[0].Probe || !e.Paths[0].Up || !e.Paths[1].Up {
			t.Errorf("installed %+v", e)
		}
		c := ms.status(t).Counters
		if c.Forwarded != 1 || c.ReplyMappings != 0 || c.Tunnel.RequestsAnswered["answered"] != 1 {
			t.Errorf("the map-resolver did not forward to the xtr, which did not answer: %+v %+v", c, c.Tunnel)
		}
	})

	t.Run("probing", func(t *testing.T) {
		waitFor(t, "both locators to answer probes", func() bool {
			p := itr.status(t).Probes
			return len(p) == 2 && p[0].Answered > 0 && p[1].Answered > 0
		})
		st := itr.status(t)
		if st.Probes[0].Address != "127.0.0.1" || st.Probes[1].Address != "127.0.0.4" || st.Probes[1].SRTT <= 0 {
			t.Errorf("RTT matrix: %+v", st.Probes)
		}
		if hop := st.MapCache[0].Paths[1].Hops[0]; hop.RTT <= 0 || !hop.Up {
			t.Errorf("map-cache hop %+v", hop)
		}
		rtr.stop()
		e := dp3.waitEntry(t, "10.1.0.0/16", "the path through the stopped RTR to go down", func(e dataplane.Entry) bool {
			return !e.Paths[1].Up
		})
		if !e.Paths[0].Up {
			t.Errorf("the direct path went down with the RTR: %+v", e)
		}
		if st := itr.status(t); st.Probes[1].Up || st.Counters.Tunnel.Locators[1].Up {
			t.Errorf("the RTR is not down in the status: %+v", st.Probes)
		}
		runDaemon(top, rtrConfig, nd.Do, newFakeDP().option())
		dp3.waitEntry(t, "10.1.0.0/16", "the path through the RTR to come back", func(e dataplane.Entry) bool {
			return e.Paths[0].Up && e.Paths[1].Up
		})
	})

	t.Run("SMR when the site's RLOC goes down", func(t *testing.T) {
		n := ms.d.XTR().SetLocatorReachable(parseAddr("127.0.0.1"), false)
		if n != 1 {
			t.Fatalf("%d SMRs sent, want 1 to the ITR that asked", n)
		}
		// The ITR asks again through the map-resolver and installs the
		// mapping with both paths down (their R bits clear).
		dp3.waitEntry(t, "10.1.0.0/16", "the refreshed mapping", func(e dataplane.Entry) bool {
			return !e.Paths[0].Up && !e.Paths[1].Up
		})
		ms.d.XTR().SetLocatorReachable(parseAddr("127.0.0.1"), true)
		dp3.waitEntry(t, "10.1.0.0/16", "the mapping up again", func(e dataplane.Entry) bool {
			return e.Paths[0].Up && e.Paths[1].Up
		})
		c := itr.status(t).Counters.Tunnel
		if c.SMRsReceived != 2 || c.MapReplyRecords["installed"] != 3 || c.ProbesMissed > 8 { // a few while the RTR was stopped, not one every 100ms since
			t.Errorf("ITR counters %+v", c)
		}
	})

	t.Run("lispd status", func(t *testing.T) {
		st := ms.status(t)
		if st.XTR == nil || st.XTR.MapServers[0].State != "registered" || st.XTR.ITRs != 1 ||
			!strings.HasPrefix(st.XTR.Mappings[0].Locators[1].Address, "elp{127.0.0.4(P)") {
			t.Errorf("xtr status %+v", st.XTR)
		}
		if st.MapServer == nil || st.Counters.Tunnel == nil || len(st.MapCache) != 1 || !st.MapCache[0].Local {
			t.Errorf("status of the lispd of every role: %+v", st)
		}
	})
}

func parseAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
