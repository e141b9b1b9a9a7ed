package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// layered is a LISP-TE overlay of two domains: site b registers the
// inter-domain ELP (ra, e, xd), whose middle hop e is the EID of a second
// domain (the L bit), and that domain registers e with its intra-domain
// ELP (x, y, b); another path through the domain goes by x2.
//
//	hostA -- xs -- ra -- x --- y -- b -- xd -- hostB
//	          |      \        /
//	          ms      +- x2 -+
type layered struct {
	hostA, xs, ra, x, x2, y, b, xd, hostB, ms *testnet.Node
	socks                                     map[string]string // by router
	domain                                    *etr              // registers e
}

const layeredKey = "layered secret"

// The hops: each router's address towards the west, xd's towards b.
const (
	hopRA, hopX, hopX2, hopY, hopB, hopXD = "10.0.1.2", "10.0.2.2", "10.0.6.2", "10.0.3.2", "10.0.4.2", "10.0.5.2"
	eidE                                  = "10.77.0.1"
)

func newLayered(t *testing.T) *layered {
	n := testnet.New(t)
	l := &layered{hostA: n.Node("hosta"), xs: n.Node("xs"), ra: n.Node("ra"), x: n.Node("x"), x2: n.Node("x2"),
		y: n.Node("y"), b: n.Node("b"), xd: n.Node("xd"), hostB: n.Node("hostb"), ms: n.Node("ms"), socks: map[string]string{}}
	siteA := n.Link(l.hostA, l.xs, "10.1.0.1/24", "10.1.0.254/24")
	n.Link(l.xs, l.ms, "10.0.100.1/24", "10.0.100.2/24")
	xsRA := n.Link(l.xs, l.ra, "10.0.1.1/24", hopRA+"/24")
	raX := n.Link(l.ra, l.x, "10.0.2.1/24", hopX+"/24")
	raX2 := n.Link(l.ra, l.x2, "10.0.6.1/24", hopX2+"/24")
	xY := n.Link(l.x, l.y, "10.0.3.1/24", hopY+"/24")
	x2Y := n.Link(l.x2, l.y, "10.0.7.1/24", "10.0.7.2/24")
	yB := n.Link(l.y, l.b, "10.0.4.1/24", hopB+"/24")
	bXD := n.Link(l.b, l.xd, "10.0.5.1/24", hopXD+"/24")
	siteB := n.Link(l.xd, l.hostB, "10.2.0.254/24", "10.2.0.1/24")
	l.hostA.AddRoute("default", "10.1.0.254")
	l.hostB.AddRoute("default", "10.2.0.254")
	l.ms.AddRoute("default", "10.0.100.1")
	l.xs.AddRoute("default", hopRA)
	l.ra.AddRoute("default", hopX)
	l.ra.AddRoute("10.0.100.0/24", "10.0.1.1")
	for _, dst := range []string{"10.0.1.0/24", "10.0.100.0/24", "10.0.6.0/24"} {
		l.x.AddRoute(dst, "10.0.2.1")
	}
	l.x.AddRoute("default", hopY)
	for _, dst := range []string{"10.0.1.0/24", "10.0.100.0/24", "10.0.2.0/24"} {
		l.x2.AddRoute(dst, "10.0.6.1")
		l.y.AddRoute(dst, "10.0.3.1")
	}
	l.x2.AddRoute("default", "10.0.7.2")
	l.y.AddRoute("10.0.6.0/24", "10.0.7.1")
	l.y.AddRoute("default", hopB)
	l.b.AddRoute("default", "10.0.4.1")
	l.xd.AddRoute("default", "10.0.5.1")
	routers(l.xs, l.ra, l.x, l.x2, l.y, l.b, l.xd, l.ms)
	l.socks["ms"] = startTunnelLispd(t, l.ms, "ms", `
roles: [map-server, map-resolver]
listen: ["10.0.100.2"]
control: {socket: "{sock}"}
map-server:
  sites:
    - {name: a, keys: [{id: 1, secret: "`+layeredKey+`"}], eid-prefixes: [{prefix: 10.1.0.0/24}]}
    - {name: b, keys: [{id: 1, secret: "`+layeredKey+`"}], eid-prefixes: [{prefix: 10.2.0.0/24}]}
    - {name: domain, keys: [{id: 1, secret: "`+layeredKey+`"}], eid-prefixes: [{prefix: 10.77.0.0/24}]}
`)
	l.socks["xs"] = startTunnelLispd(t, l.xs, "xs", xtrConfig(l.xs, siteA, []*testnet.Link{xsRA}, "", "10.1.0.0/24", layeredKey,
		"[{address: 10.0.1.1, priority: 1, weight: 100}]"))
	l.socks["xd"] = startTunnelLispd(t, l.xd, "xd", xtrConfig(l.xd, siteB, []*testnet.Link{bXD}, "", "10.2.0.0/24", layeredKey,
		`[{elp: [`+hopRA+`, {address: `+eidE+`, lookup: true}, `+hopXD+`], priority: 1, weight: 100}]`))
	for name, r := range map[string]struct {
		nd    *testnet.Node
		links []*testnet.Link
	}{
		"ra": {l.ra, []*testnet.Link{xsRA, raX, raX2}}, "x": {l.x, []*testnet.Link{raX, xY}},
		"x2": {l.x2, []*testnet.Link{raX2, x2Y}}, "y": {l.y, []*testnet.Link{xY, x2Y, yB}}, "b": {l.b, []*testnet.Link{yB, bXD}},
	} {
		l.socks[name] = startTunnelLispd(t, r.nd, name, rtrConfig(r.nd, r.links...))
	}
	// The second domain registers e, from the ms's node, with its ELP.
	l.domain = newETR(t, l.ms, "10.0.100.2:0", netip.MustParseAddrPort("10.0.100.2:4342"), layeredKey)
	l.registerE(t, hopX, hopY, hopB)
	waitFor(t, "both xTRs registered", func() bool {
		a, b := tunnelStatus(t, l.socks["xs"]), tunnelStatus(t, l.socks["xd"])
		return a.XTR.MapServers[0].State == "registered" && b.XTR.MapServers[0].State == "registered"
	})
	return l
}

// routers forward, whichever way packets come back.
func routers(nodes ...*testnet.Node) {
	for _, nd := range nodes {
		nd.EnableForwarding()
		nd.SetSysctl("net.ipv4.conf.all.rp_filter", "0")
		nd.SetSysctl("net.ipv4.conf.default.rp_filter", "0")
	}
}

// xtrConfig is an xTR's lispd configuration: its site's hosts on eid,
// its RLOCs on rlocs, more map-cache settings, its prefix registered with
// the locators given (a YAML list) with the map-server 10.0.100.2, which
// answers for it, with key.
func xtrConfig(nd *testnet.Node, eid *testnet.Link, rlocs []*testnet.Link, mapCache, prefix, key, locators string) string {
	var ifaces []string
	for _, l := range rlocs {
		ifaces = append(ifaces, l.Iface(nd))
	}
	return fmt.Sprintf(`
roles: [xtr]
listen: ["0.0.0.0"]
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s]}
map-cache: {map-resolvers: [10.0.100.2], probe-interval: 200ms, probe-misses: 3%s}
xtr:
  database-mappings:
    - eid-prefix: %s
      ttl: 5m
      locators: %s
  map-servers: [{address: 10.0.100.2, key-id: 1, secret: %q, proxy-reply: true}]
`, eid.Iface(nd), strings.Join(ifaces, ", "), mapCache, prefix, locators, key)
}

// rtrConfig is an RTR's lispd configuration: its RLOCs on links, the
// map-resolver 10.0.100.2, no probing.
func rtrConfig(nd *testnet.Node, links ...*testnet.Link) string {
	var ifaces []string
	for _, k := range links {
		ifaces = append(ifaces, k.Iface(nd))
	}
	return fmt.Sprintf(`
roles: [rtr]
listen: ["0.0.0.0"]
control: {socket: "{sock}"}
dataplane: {rloc-interfaces: [%s]}
map-cache: {map-resolvers: [10.0.100.2], probe-interval: 0s}
`, strings.Join(ifaces, ", "))
}

// registerE registers e's prefix with the ELP of hops (to be used,
// probed) and has every router that asked for it ask again (an SMR, as
// e's ETR would send).
func (l *layered) registerE(t *testing.T, hops ...string) {
	t.Helper()
	elp := &lisp.ELP{}
	for _, h := range hops {
		elp.Hops = append(elp.Hops, lisp.ELPHop{Address: lisp.MustParseAddress(h), RLOCProbe: true, Strict: true})
	}
	rec := record("10.77.0.0/24", lisp.LCAFAddress(elp))
	rec.TTL = 10
	l.domain.registerOnce(&lisp.MapRegister{ProxyReply: true, Auth: lisp.Auth{KeyID: 1}, Records: []lisp.MapRecord{rec}})
	e := mapping.NewEID(0, netip.MustParsePrefix("10.77.0.0/24"))
	c, err := l.ms.ListenUDP("udp4", "10.0.100.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, to := range []string{"10.0.1.1", hopRA, hopX, hopX2, hopY, hopB} {
		b, err := control.EncodeSMR(e, 0, netip.Addr{}, []netip.Addr{netip.MustParseAddr("10.0.100.2")}, netip.MustParseAddr(to))
		if err != nil {
			t.Fatal(err)
		}
		c.WriteToUDPAddrPort(b, netip.MustParseAddrPort(to+":4342"))
	}
}

// expanded is how xs installs its path to site b: its hops, expanded,
// and whether it is up, or why not.
func (l *layered) expanded(t *testing.T) string {
	t.Helper()
	for _, e := range tunnelStatus(t, l.socks["xs"]).MapCache {
		if e.EIDPrefix == "10.2.0.0/24" && len(e.Paths) == 1 {
			p := e.Paths[0]
			if !p.Up {
				return "down: " + p.Down
			}
			return strings.Join(p.Expanded, ">")
		}
	}
	return ""
}

// TestMultiLayerPath: the ELP hop with the L bit, an EID of a second
// domain, is looked up and replaced by that domain's ELP at xs and at
// every RTR, so that traffic goes xs > ra > x > y > b > xd, each RTR
// finding itself and its next hop (their counters); when the domain
// registers another ELP and the routers hear of it (an SMR), traffic
// moves to it; an expansion that repeats an RLOC is refused, counted.
func TestMultiLayerPath(t *testing.T) {
	l := newLayered(t)
	if err := echoFlows(l.hostA, l.hostB, "10.2.0.1:7", 4); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{hopRA, hopX, hopY, hopB, hopXD}, ">")
	waitFor(t, "xs to expand the path", func() bool { return l.expanded(t) == want })

	before := map[string]map[string]uint64{}
	for _, name := range []string{"ra", "x", "x2", "y", "b"} {
		before[name] = rtrCounters(t, l.socks[name])
	}
	transfer(t, l.hostA, l.hostB, "10.1.0.1", "10.2.0.1", false, 4<<20)
	grew := func(name string) uint64 {
		return rtrCounters(t, l.socks[name])["rtr_path0_bytes"] - before[name]["rtr_path0_bytes"]
	}
	for _, name := range []string{"ra", "x", "y", "b"} {
		if got := grew(name); got < 4<<20 {
			t.Errorf("%s re-encapsulated %d bytes of 4 MiB", name, got)
		}
	}
	if got := grew("x2"); got != 0 {
		t.Errorf("x2, on no path, re-encapsulated %d bytes", got)
	}
	for _, name := range []string{"ra", "x"} {
		for _, e := range tunnelStatus(t, l.socks[name]).MapCache {
			if e.EIDPrefix == "10.2.0.0/24" && strings.Join(e.Paths[0].Expanded, ">") != want {
				t.Errorf("%s expanded %v, want %s", name, e.Paths[0].Expanded, want)
			}
		}
	}

	t.Run("the domain's ELP changes", func(t *testing.T) {
		l.registerE(t, hopX2, hopY)
		moved := strings.Join([]string{hopRA, hopX2, hopY, hopXD}, ">")
		waitFor(t, "xs to expand the path anew", func() bool { return l.expanded(t) == moved })
		for _, name := range []string{"x", "x2"} {
			before[name] = rtrCounters(t, l.socks[name])
		}
		// ra hears of it too, then x2 and y (on their first packets).
		if err := echoFlows(l.hostA, l.hostB, "10.2.0.1:7", 4); err != nil {
			t.Fatal(err)
		}
		transfer(t, l.hostA, l.hostB, "10.1.0.1", "10.2.0.1", false, 4<<20)
		if got := grew("x2"); got < 4<<20 {
			t.Errorf("x2 re-encapsulated %d bytes of 4 MiB", got)
		}
		if got := grew("x"); got != 0 {
			t.Errorf("x, no longer on the path, re-encapsulated %d bytes", got)
		}
	})

	t.Run("a loop is refused", func(t *testing.T) {
		l.registerE(t, hopX, hopRA, hopB)
		loop := "down: a loop: " + hopRA + " twice"
		waitFor(t, "xs to refuse the loop", func() bool { return l.expanded(t) == loop })
		if c := tunnelStatus(t, l.socks["xs"]).Counters.Tunnel.Expansions; c["loop"] == 0 {
			t.Errorf("expansions %v, want the loop counted", c)
		}
	})
}
