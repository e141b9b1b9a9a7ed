package resolver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/ddt"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/lisp"
)

// ddtNet is a DDT tree in memory: a resolver, DDT nodes and map-servers
// (the real ones of control/ddt and control/mapserver) by address, and
// an ITR. Datagrams go from outbox to handler until none is left; a
// node marked dead drops what it gets.
type ddtNet struct {
	t     testing.TB
	r     *Resolver
	now   time.Time
	nodes map[netip.Addr]authority
	dead  map[netip.Addr]bool
	// asked counts the DDT Map-Requests each address got (dead or not).
	asked map[netip.Addr]int
	// toITR holds the Map-Replies the ITR got, forwarded are the
	// requests that reached an ETR.
	toITR     []*lisp.MapReply
	forwarded int
	// nowhere, when set, drops datagrams to addresses no one has, as the
	// network would; else they fail the test.
	nowhere bool
}

// authority is a DDT node or map-server.
type authority interface {
	HandleECM(raw []byte, ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox)
}

var (
	resolverRLOC = netip.MustParseAddrPort("203.0.113.1:4342")
	itrRLOC      = netip.MustParseAddr("198.51.100.1")
)

// The tree of these tests:
//
//	root 192.0.2.1, .2     10.0.0.0/8
//	  eu 192.0.2.11, .12     10.1.0.0/16
//	    ms 192.0.2.101, .102   10.1.0.0/17 (peers)
//	    ms 192.0.2.103         10.1.128.0/17
//	  us 192.0.2.21          10.2.0.0/16
//	    ms 192.0.2.104         10.2.0.0/17
const (
	rootYAML = `
authoritative-prefixes: [{prefix: 10.0.0.0/8}]
delegations:
  - {prefix: 10.1.0.0/16, referrals: [192.0.2.11, 192.0.2.12]}
  - {prefix: 10.2.0.0/16, referrals: [192.0.2.21]}
`
	euYAML = `
authoritative-prefixes: [{prefix: 10.1.0.0/16}]
delegations:
  - {prefix: 10.1.0.0/17, type: map-server, referrals: [192.0.2.101, 192.0.2.102]}
  - {prefix: 10.1.128.0/17, type: map-server, referrals: [192.0.2.103]}
`
	usYAML = `
authoritative-prefixes: [{prefix: 10.2.0.0/16}]
delegations: [{prefix: 10.2.0.0/17, type: map-server, referrals: [192.0.2.104]}]
`
)

func newDDTNet(t testing.TB, resolverYAML string) *ddtNet {
	t.Helper()
	n := &ddtNet{t: t, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC),
		nodes: map[netip.Addr]authority{}, dead: map[netip.Addr]bool{}, asked: map[netip.Addr]int{}}
	n.node(rootYAML, "192.0.2.1", "192.0.2.2")
	n.node(euYAML, "192.0.2.11", "192.0.2.12")
	n.node(usYAML, "192.0.2.21")
	peers := "\n  ddt: {authoritative-prefixes: [{prefix: 10.1.0.0/17}], peers: [192.0.2.101, 192.0.2.102]}\n"
	n.mapServer("192.0.2.101", "10.1.0.0/17", peers, "10.1.0.0/24")
	n.mapServer("192.0.2.102", "10.1.0.0/17", peers, "10.1.0.0/24")
	n.mapServer("192.0.2.103", "10.1.128.0/17", "", "10.1.128.0/24")
	n.mapServer("192.0.2.104", "10.2.0.0/17", "", "10.2.0.0/24")
	cfg, err := config.Parse([]byte("roles: [map-resolver]\nmap-resolver:\n  rate-limit: {per-second: 0}\n  ddt:\n" +
		"    root: [192.0.2.1, 192.0.2.2]\n" + resolverYAML))
	if err != nil {
		t.Fatal(err)
	}
	n.r = New(cfg.MapResolver, nil, nil, WithSender(control.SenderFunc(func(dst netip.AddrPort, b []byte) error {
		var out control.Outbox
		out.AppendBytes(dst, b)
		n.deliver(resolverRLOC, &out)
		return nil
	})))
	n.r.SetClock(func() time.Time { return n.now })
	return n
}

// node adds a DDT node at addrs.
func (n *ddtNet) node(yaml string, addrs ...string) *ddt.Node {
	n.t.Helper()
	var cfg config.DDTNode
	if err := config.Decode([]byte(yaml), &cfg); err != nil {
		n.t.Fatal(err)
	}
	c := &config.Config{Roles: []config.Role{config.RoleDDTNode}, DDTNode: &cfg}
	c.Defaults()
	if err := c.Validate(); err != nil {
		n.t.Fatal(err)
	}
	node, err := ddt.NewNode(c.DDTNode, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, a := range addrs {
		n.nodes[netip.MustParseAddr(a)] = &ddt.Authority{Node: node}
	}
	return node
}

// mapServer adds a map-server at addr for a site of prefix, with ddt
// (YAML under map-server, may be ""), and registers registered (may be
// "") for proxy replies.
func (n *ddtNet) mapServer(addr, prefix, ddtYAML, registered string) {
	n.t.Helper()
	cfg, err := config.Parse([]byte(`
roles: [map-server]
map-server:
  sites: [{name: s, keys: [{id: 0, secret: k}], eid-prefixes: [{prefix: ` + prefix + `, accept-more-specifics: true}]}]` + ddtYAML))
	if err != nil {
		n.t.Fatal(err)
	}
	ms, err := mapserver.New(cfg.MapServer, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	if registered != "" {
		p := netip.MustParsePrefix(registered)
		reg := &lisp.MapRegister{ProxyReply: true, Nonce: control.TimeNonce(time.Now()), Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 3, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()),
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress("198.51.100.200")}}}}}
		raw, err := reg.AppendSigned(nil, []byte("k"))
		if err != nil {
			n.t.Fatal(err)
		}
		var out control.Outbox
		ms.HandleRegister(raw, netip.MustParseAddrPort("198.51.100.200:4342"), &out)
		if ms.Counters().Registrations != 1 {
			n.t.Fatalf("map-server %s: registration of %s refused", addr, registered)
		}
	}
	n.nodes[netip.MustParseAddr(addr)] = ddt.NewMapServer(cfg.MapServer, ms, nil)
}

// request sends the ITR's Map-Request for eid and delivers everything
// that follows. It returns the nonce.
func (n *ddtNet) request(eid string, nonce uint64) {
	n.t.Helper()
	ip := netip.MustParseAddr(eid)
	e := &lisp.ECM{Source: netip.AddrPortFrom(itrRLOC, 61000), Destination: netip.AddrPortFrom(ip, 4342), TTL: 64,
		Message: &lisp.MapRequest{Nonce: nonce, ITRRLOCs: []lisp.Address{lisp.IPAddress(itrRLOC)},
			Records: []lisp.RequestRecord{{EID: lisp.IPAddress(ip), MaskLen: 32}}}}
	raw, err := e.AppendBinary(nil)
	if err != nil {
		n.t.Fatal(err)
	}
	m, err := lisp.Parse(raw)
	if err != nil {
		n.t.Fatal(err)
	}
	var out control.Outbox
	n.r.HandleECM(raw, m.(*lisp.ECM), netip.AddrPortFrom(itrRLOC, 4342), &out)
	n.deliver(resolverRLOC, &out) // what the resolver sends
}

// deliver hands the datagrams of out, sent from from, to their
// receivers, and what those send to theirs, until nothing is left.
func (n *ddtNet) deliver(from netip.AddrPort, out *control.Outbox) {
	type dgram struct {
		from, to netip.AddrPort
		b        []byte
	}
	var queue []dgram
	take := func(from netip.AddrPort, out *control.Outbox) {
		for i := range out.Len() {
			dst, b := out.At(i)
			queue = append(queue, dgram{from, dst, append([]byte(nil), b...)})
		}
	}
	take(from, out)
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		m, err := lisp.Parse(d.b)
		if err != nil {
			n.t.Fatalf("datagram to %s does not decode: %v", d.to, err)
		}
		var next control.Outbox
		switch {
		case d.to == resolverRLOC:
			n.r.HandleReferral(d.b, d.from, &next)
		case d.to.Addr() == itrRLOC:
			n.toITR = append(n.toITR, m.(*lisp.MapReply))
		case netip.MustParsePrefix("198.51.100.0/24").Contains(d.to.Addr()): // ETRs
			n.forwarded++
		default:
			node, ok := n.nodes[d.to.Addr()]
			if !ok && n.nowhere {
				continue
			}
			if !ok {
				n.t.Fatalf("datagram to %s, where no one listens: %s", d.to, m)
			}
			if d.to.Port() != 4342 {
				n.t.Fatalf("datagram to %s: DDT nodes listen on 4342", d.to)
			}
			n.asked[d.to.Addr()]++
			if n.dead[d.to.Addr()] {
				continue
			}
			ecm := m.(*lisp.ECM)
			if !ecm.DDT {
				n.t.Errorf("DDT Map-Request to %s without the D bit", d.to)
			}
			node.HandleECM(d.b, ecm, d.from, &next)
		}
		take(d.to, &next)
	}
}

// wait advances the clock by d and lets the resolver's timers run.
func (n *ddtNet) wait(d time.Duration) {
	n.now = n.now.Add(d)
	n.r.ddt.Tick()
}

func (n *ddtNet) counters() DDTCounters {
	c, _ := n.r.DDTCounters()
	return c
}

// lastReply is the ITR's last Map-Reply, which must answer nonce.
func (n *ddtNet) lastReply(nonce uint64) *lisp.MapReply {
	n.t.Helper()
	if len(n.toITR) == 0 {
		n.t.Fatalf("the ITR got no Map-Reply for nonce %d", nonce)
	}
	m := n.toITR[len(n.toITR)-1]
	if m.Nonce != nonce {
		n.t.Fatalf("the ITR's last Map-Reply has nonce %d, want %d", m.Nonce, nonce)
	}
	return m
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
