package daemon_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/metrics"
)

// The te role with the routers it engineers, each lispd with port 4342
// and its metrics on an address of lo in a namespace of their own:
//
//	127.0.0.1  map-server, map-resolver and te
//	127.0.0.2  the xtr of site a (10.1.0.0/16), which probes both RTRs
//	127.0.0.3  the xtr of site b (10.2.0.0/16), which joins the overlay
//	           through the closer RTR
//	127.0.0.4  RTR r4 and 127.0.0.5 RTR r5, which probe site b's xtr
const (
	teConfig = `
roles: [map-server, map-resolver, te]
listen: [127.0.0.1]
control: {socket: "{sock}"}
map-server:
  sites:
    - {name: a, keys: [{id: 0, secret: "` + siteKey + `"}], eid-prefixes: [{prefix: 10.1.0.0/16}]}
    - {name: b, keys: [{id: 0, secret: "` + siteKey + `"}], eid-prefixes: [{prefix: 10.2.0.0/16}]}
map-resolver: {rate-limit: {per-second: 0}}
te:
  collect-interval: 200ms
  nodes: [{name: r4, rlocs: [127.0.0.4]}, {name: r5, rlocs: [127.0.0.5]}]
  head-of-line: {rtt-factor: 0}
`
	teXTRA = `
roles: [xtr]
listen: [127.0.0.2]
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], request-timeout: 500ms, probe-interval: 100ms, probe-peers: [127.0.0.4, 127.0.0.5]}
xtr:
  database-mappings: [{eid-prefix: 10.1.0.0/16, locators: [{address: 127.0.0.2}]}]
  map-servers: [{address: 127.0.0.1, secret: "` + siteKey + `", proxy-reply: true}]
`
	teXTRB = `
roles: [xtr]
listen: [127.0.0.3]
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], request-timeout: 500ms, probe-interval: 100ms}
xtr:
  database-mappings: [{eid-prefix: 10.2.0.0/16, locators: [{address: 127.0.0.3, priority: 2}]}]
  map-servers: [{address: 127.0.0.1, secret: "` + siteKey + `", proxy-reply: true}]
  join: {rtrs: [127.0.0.4, 127.0.0.5], count: 1}
`
	teRTR = `
roles: [rtr]
listen: [127.0.0.%d]
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1], probe-interval: 100ms, probe-peers: [127.0.0.3]}
`
)

// serveMetrics serves a daemon's metrics in the namespace, as lispd does
// with metrics.listen.
func serveMetrics(t *testing.T, nd *testnet.Node, r *running, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nd.Do(func() error { return metrics.Serve(ctx, addr, metrics.Lispd(r.d.Counters)) })
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// fetchIn reads metrics from inside the namespace: the te role's HTTP
// client would dial from the test's own.
func fetchIn(nd *testnet.Node) daemon.Option {
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		nd.Do(func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return nil
		})
		return c, err
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: dial}}
	return daemon.WithTEFetch(func(ctx context.Context, url string) ([]pce.Row, error) {
		return pce.Scrape(ctx, client, url)
	})
}

func TestTEInNamespace(t *testing.T) {
	nd := testnet.New(t).Node("lispd")
	ms := runDaemon(t, teConfig, nd.Do, newFakeDP().option(), fetchIn(nd))
	dpA := newFakeDP("127.0.0.2")
	a := runDaemon(t, teXTRA, nd.Do, dpA.option())
	b := runDaemon(t, teXTRB, nd.Do, newFakeDP("127.0.0.3").option())
	serveMetrics(t, nd, a, "127.0.0.2:9342")
	serveMetrics(t, nd, b, "127.0.0.3:9342")
	for _, n := range []int{4, 5} {
		r := runDaemon(t, strings.Replace(teRTR, "%d", string(rune('0'+n)), 1), nd.Do, newFakeDP().option())
		serveMetrics(t, nd, r, "127.0.0."+string(rune('0'+n))+":9342")
	}

	// The te role learns a and b from their registrations, reads the
	// rows of a, r4 and r5 (probe-peers), and builds the overlay graph.
	waitFor(t, "the RTT matrix", func() bool {
		te := ms.status(t).TE
		up := 0
		for _, l := range te.Matrix {
			if l.Up && l.RTT > 0 && l.To != "" {
				up++
			}
		}
		return len(te.Nodes) == 4 && up >= 4 && te.Edges >= 4
	})
	st := ms.status(t).TE
	for _, n := range st.Nodes {
		if n.Error != "" || n.Read.IsZero() {
			t.Errorf("node %+v not read", n)
		}
	}

	// The join: b registers an ELP through the closer RTR before its RLOC.
	waitFor(t, "site b to join the overlay", func() bool {
		j := b.status(t).Join
		return j != nil && j.Changes > 0
	})
	if regs := ms.status(t).MapServer.Sites[1].Registrations; len(regs) != 1 || len(regs[0].Locators) < 1 {
		t.Errorf("site b's registration: %+v", regs)
	}
	waitFor(t, "b's registration with the join's ELP", func() bool {
		regs := ms.status(t).MapServer.Sites[1].Registrations
		return len(regs) == 1 && len(regs[0].Locators) == 2 && strings.HasPrefix(regs[0].Locators[0].Address, "elp{127.0.0.")
	})

	// a misses site b: its Map-Request gets the te role's set, both ELPs
	// (the RTTs on lo are within a few tens of microseconds), which the
	// data plane gets as paths.
	dpA.miss("10.2.0.7")
	e := dpA.waitEntry(t, "10.2.0.0/16", "site b's mapping", func(dataplane.Entry) bool { return true })
	var hops []string
	for _, p := range e.Paths {
		var hs []string
		for _, h := range p.Hops {
			hs = append(hs, h.Addr.String())
		}
		hops = append(hops, strings.Join(hs, ">"))
		if p.Priority != 1 || !p.Up {
			t.Errorf("path %+v", p)
		}
	}
	if len(hops) != 2 || !strings.HasSuffix(hops[0], ">127.0.0.3") || !strings.HasSuffix(hops[1], ">127.0.0.3") || hops[0] == hops[1] {
		t.Fatalf("a installed %v, want an ELP through each RTR to 127.0.0.3", hops)
	}
	st = ms.status(t).TE
	if len(st.Pairs) != 1 || st.Pairs[0].Source != "a" || st.Pairs[0].Destination != "b" || len(st.Pairs[0].ELPs) != 2 ||
		st.Pairs[0].Reason != "first set" {
		t.Errorf("pairs %+v", st.Pairs)
	}
	c := ms.status(t).Counters
	if c.TE == nil || c.TE.AnswersMasked < 1 || c.TE.Computations < 1 || c.TE.Scrapes < 4 {
		t.Errorf("te counters %+v", c.TE)
	}
	// a's own status shows the peers it probes, both answered.
	waitFor(t, "a's probes of both RTRs", func() bool {
		n := 0
		for _, p := range a.status(t).Probes {
			if (p.Address == "127.0.0.4" || p.Address == "127.0.0.5") && p.Answered > 0 {
				n++
			}
		}
		return n == 2
	})
}
