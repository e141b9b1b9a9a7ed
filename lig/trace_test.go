package lig

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/ddt"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/lisp"
)

// ddtTree serves real DDT nodes and a DDT map-server on loopback
// addresses that share one port, which the trace is told referral sets
// listen on:
//
//	root 127.0.0.31           10.0.0.0/8
//	  node 127.0.0.33 (silent), 127.0.0.32   10.1.0.0/16
//	    map-server 127.0.0.34   10.1.0.0/17, 10.1.0.0/24 registered
type ddtTree struct {
	root netip.AddrPort
}

func newDDTTree(t *testing.T, nodeYAML string) *ddtTree {
	t.Helper()
	first, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 31)})
	if err != nil {
		t.Skipf("cannot bind 127.0.0.31: %v", err)
	}
	port := first.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	old := referralPort
	referralPort = port
	t.Cleanup(func() { referralPort = old })
	serve(t, first, authority(t, `
roles: [ddt-node]
ddt-node:
  authoritative-prefixes: [{prefix: 10.0.0.0/8}]
  delegations: [{prefix: 10.1.0.0/16, referrals: [127.0.0.33, 127.0.0.32]}]
`))
	serve(t, listenAt(t, "127.0.0.32", port), authority(t, nodeYAML))
	serve(t, listenAt(t, "127.0.0.34", port), authority(t, `
roles: [map-server]
map-server:
  sites: [{name: s, keys: [{id: 0, secret: k}], eid-prefixes: [{prefix: 10.1.0.0/17, accept-more-specifics: true}]}]
`))
	return &ddtTree{root: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.31"), port)}
}

const nodeYAML = `
roles: [ddt-node]
ddt-node:
  authoritative-prefixes: [{prefix: 10.1.0.0/16}]
  delegations: [{prefix: 10.1.0.0/17, type: map-server, referrals: [127.0.0.34]}]
`

func listenAt(t *testing.T, addr string, port uint16) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(addr), port)))
	if err != nil {
		t.Skipf("cannot bind %s:%d: %v", addr, port, err)
	}
	return c
}

// authority builds a DDT node or map-server from a lispd configuration.
func authority(t *testing.T, yaml string) *ddt.Authority {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	a := &ddt.Authority{}
	if cfg.DDTNode != nil {
		if a.Node, err = ddt.NewNode(cfg.DDTNode, nil); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.MapServer != nil {
		ms, err := mapserver.New(cfg.MapServer, nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := &lisp.MapRegister{ProxyReply: true, Nonce: control.TimeNonce(time.Now()), Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 24,
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress("192.0.2.77")}}}}}
		raw, err := reg.AppendSigned(nil, []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		var out control.Outbox
		ms.HandleRegister(raw, netip.MustParseAddrPort("192.0.2.77:4342"), &out)
		a.MapServer = ddt.NewMapServer(cfg.MapServer, ms, nil)
	}
	return a
}

// serve answers DDT Map-Requests on c until the test ends.
func serve(t *testing.T, c *net.UDPConn, a *ddt.Authority) {
	done := make(chan struct{})
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			var e lisp.ECM
			if err := e.DecodeFromBytes(buf[:n]); err != nil {
				t.Errorf("DDT node got a malformed ECM: %v", err)
				continue
			}
			var out control.Outbox
			a.HandleECM(buf[:n], &e, from, &out)
			for i := range out.Len() {
				dst, b := out.At(i)
				c.WriteToUDPAddrPort(b, dst)
			}
		}
	}()
}

func traceOptions(tree *ddtTree) Options {
	return Options{Resolver: tree.root, Source: netip.MustParseAddr("127.0.0.1"), Tries: 3, Timeout: time.Second}
}

// A trace follows root, node and map-server, trying the second RLOC of
// the node's set when the first is silent, and ends with the map-server's
// Map-Reply.
func TestTraceToMapReply(t *testing.T) {
	tree := newDDTTree(t, nodeYAML)
	res, err := Trace(context.Background(), netip.MustParseAddr("10.1.0.5"), traceOptions(tree))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hops) != 3 {
		t.Fatalf("%d hops: %+v", len(res.Hops), res.Hops)
	}
	for i, want := range []struct {
		node   string
		action lisp.ReferralAction
		prefix string
		tries  int
	}{
		{"127.0.0.31", lisp.ReferralNode, "10.1.0.0/16", 1},
		{"127.0.0.32", lisp.ReferralMS, "10.1.0.0/17", 2}, // 127.0.0.33 first, silent
		{"127.0.0.34", lisp.ReferralMSAck, "10.1.0.0/24", 1},
	} {
		h := res.Hops[i]
		prefix := netip.PrefixFrom(h.Referral.EID.IP(), int(h.Referral.MaskLen)).String()
		if h.Node.Addr().String() != want.node || h.Referral.Action != want.action || prefix != want.prefix || h.Tries != want.tries {
			t.Errorf("hop %d: %s said %s %s after %d tries, want %s %s %s %d", i, h.Node, h.Referral.Action, prefix, h.Tries,
				want.node, want.action, want.prefix, want.tries)
		}
	}
	if res.Reply == nil || res.Reply.Records[0].Locators[0].Address.String() != "192.0.2.77" || res.Replier.Addr().String() != "127.0.0.34" {
		t.Fatalf("reply %v from %s", res.Reply, res.Replier)
	}
	var text bytes.Buffer
	if err := WriteTraceText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Send DDT map-request to 127.0.0.31:", "map-referral from 127.0.0.31:", ": node-referral 10.1.0.0/16, ttl 1440 mins, auth\n  referrals: 127.0.0.33 0/0, 127.0.0.32 0/0",
		": ms-ack 10.1.0.0/24, ttl 1440 mins, auth, incomplete\n",
		"Send DDT map-request to 127.0.0.32:", "(try 2 at this level: no answer before)",
		"Received map-reply from 127.0.0.34:", "192.0.2.77",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("trace text lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, res, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"referrals":[{"node":"127.0.0.31:`) || !strings.Contains(js.String(), `"action":"ms-ack"`) {
		t.Errorf("JSON: %s", js.String())
	}
}

// A negative referral ends the trace with an answer and no reply.
func TestTraceHole(t *testing.T) {
	tree := newDDTTree(t, nodeYAML)
	res, err := Trace(context.Background(), netip.MustParseAddr("10.9.0.1"), traceOptions(tree))
	if err != nil || res.Reply != nil || len(res.Hops) != 1 || res.Hops[0].Referral.Action != lisp.ReferralDelegationHole {
		t.Fatalf("trace: %v, %+v", err, res)
	}
	var text bytes.Buffer
	WriteTraceText(&text, res)
	if !strings.Contains(text.String(), "delegation-hole 10.8.0.0/13, ttl 15 mins") || !strings.Contains(text.String(), "a delegation hole, no site has it") {
		t.Errorf("trace text:\n%s", text.String())
	}
}

// A referral no more specific than the last stops the trace.
func TestTraceLoop(t *testing.T) {
	tree := newDDTTree(t, `
roles: [ddt-node]
ddt-node:
  authoritative-prefixes: [{prefix: 10.1.0.0/16}]
  delegations: [{prefix: 10.1.0.0/16, referrals: [127.0.0.31]}]
`)
	_, err := Trace(context.Background(), netip.MustParseAddr("10.1.0.5"), traceOptions(tree))
	if err == nil || !strings.Contains(err.Error(), "referral loop") {
		t.Errorf("trace: %v", err)
	}
}

// Nothing at the root: no referral, an error.
func TestTraceNoReferral(t *testing.T) {
	c := listenAt(t, "127.0.0.35", 0)
	defer c.Close()
	_, err := Trace(context.Background(), netip.MustParseAddr("10.1.0.5"), Options{Resolver: c.LocalAddr().(*net.UDPAddr).AddrPort(),
		Source: netip.MustParseAddr("127.0.0.1"), Tries: 2, Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrNoReferral) {
		t.Errorf("trace: %v", err)
	}
}
