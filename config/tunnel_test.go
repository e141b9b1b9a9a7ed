package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// xtrExample is an xTR of a multi-homed site: two RLOCs, and an ELP
// through two RTRs that ends at one of them ([LISP-TE]'s LISP-TE
// overlay), registered with one map-server that forwards Map-Requests to
// it and another that answers for it.
const xtrExample = `
roles: [xtr]
listen: [198.51.100.1, 203.0.113.1]
dataplane:
  eid-interfaces: [eth1]
  rloc-interfaces: [eth0, eth2]
  path-selection: port-sum
  source-selection: port-sum
  rloc-gateways: {eth0: 198.51.100.254, eth2: 203.0.113.254}
map-cache:
  map-resolvers: [192.0.2.1, "192.0.2.2:4342"]
  request-timeout: 500ms
  probe-interval: 5s
xtr:
  xtr-id: 000102030405060708090a0b0c0d0e0f
  site-id: 1
  database-mappings:
    - eid-prefix: 10.1.0.0/16
      ttl: 5m
      locators:
        - {address: 198.51.100.1, priority: 1, weight: 50}
        - {address: 203.0.113.1, priority: 1, weight: 50}
        - elp: [192.0.2.11, {address: 192.0.2.12, probe: true, strict: true}, 198.51.100.1]
          priority: 2
          weight: 100
  map-servers:
    - {address: 192.0.2.1, key-id: 1, secret: site-a-secret}
    - {address: 192.0.2.2, secret: other-secret, algorithm: hmac-sha1, proxy-reply: true}
`

// rtrExample is a re-encapsulating tunnel router: no site, only a
// map-cache to resolve the next hops of the ELPs it carries.
const rtrExample = `
roles: [rtr]
dataplane: {rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [192.0.2.1], probe-interval: 0s}
`

func TestTunnelExamples(t *testing.T) {
	c, err := Parse([]byte(xtrExample))
	if err != nil {
		t.Fatalf("xtr example: %v", err)
	}
	x := c.XTR
	if len(x.DatabaseMappings) != 1 || len(x.MapServers) != 2 || x.RegisterInterval.Duration != time.Minute {
		t.Errorf("xtr = %+v", x)
	}
	m := x.DatabaseMappings[0]
	if m.TTL.Duration != 5*time.Minute || len(m.Locators) != 3 || m.Locators[2].Addr() != netip.MustParseAddr("198.51.100.1") {
		t.Errorf("mapping = %+v", m)
	}
	hops := m.Locators[2].ELP
	if hops[0] != (ELPHop{Address: "192.0.2.11"}) || hops[1] != (ELPHop{Address: "192.0.2.12", Probe: true, Strict: true}) {
		t.Errorf("ELP hops = %+v", hops)
	}
	if ms := x.MapServers; ms[0].Algorithm != "hmac-sha256" || ms[0].ProxyReply || !ms[1].ProxyReply || ms[1].KeyID != 0 {
		t.Errorf("map-servers = %+v", ms)
	}
	if id, err := x.ID(); err != nil || id == nil || id[1] != 1 || id[15] != 15 {
		t.Errorf("xtr-id = %x, %v", id, err)
	}
	mc := c.MapCache
	if mc.RequestTimeout.Duration != 500*time.Millisecond || mc.RequestRetries != DefaultRequestRetries ||
		mc.ProbeInterval.Duration != 5*time.Second || mc.ProbeMisses != DefaultProbeMisses || mc.MaxEntries != DefaultMapCacheEntries ||
		mc.HoldPerEID != DefaultHoldPerEID || mc.HoldTotal != DefaultHoldTotal {
		t.Errorf("map-cache = %+v", mc)
	}
	if dp := c.Dataplane; dp.PathSelection != "port-sum" || dp.SourceSelection != "port-sum" ||
		dp.RLOCGateways["eth2"] != "203.0.113.254" || dp.Miss != "hold" || !*dp.ClampMSS {
		t.Errorf("dataplane = %+v", dp)
	}

	c, err = Parse([]byte(rtrExample))
	if err != nil {
		t.Fatalf("rtr example: %v", err)
	}
	if c.XTR != nil || c.MapCache.ProbeInterval.Duration != 0 || c.Dataplane.InstanceID != 0 || c.Dataplane.SourceSelection != "routing" {
		t.Errorf("rtr = %+v %+v", c.XTR, c.MapCache)
	}
	// The defaults of a map-cache left out.
	c, err = Parse([]byte("roles: [rtr]\ndataplane: {rloc-interfaces: [eth0]}\nmap-cache: {map-resolvers: [192.0.2.1]}\n"))
	if err != nil || c.MapCache.ProbeInterval.Duration != DefaultProbeInterval {
		t.Errorf("default probe interval: %+v, %v", c.MapCache, err)
	}
}

// One lispd may be the map-server and map-resolver of a small overlay and
// an xTR of it at once.
func TestAllRolesInOne(t *testing.T) {
	_, err := Parse([]byte(`
roles: [map-server, map-resolver, xtr]
map-server:
  sites: [{name: a, keys: [{id: 0, secret: s}], eid-prefixes: [{prefix: 10.1.0.0/16}]}]
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [127.0.0.1]}
xtr:
  database-mappings: [{eid-prefix: 10.1.0.0/16, locators: [{address: 192.0.2.1}]}]
  map-servers: [{address: 127.0.0.1, secret: s}]
`))
	if err != nil {
		t.Fatal(err)
	}
}

// The restart settings and static map-cache entries name what is wrong.
func TestRestartAndStaticErrors(t *testing.T) {
	_, err := Parse([]byte(`
roles: [rtr]
dataplane: {rloc-interfaces: [eth0], pin-path: off, keep-on-exit: true}
map-cache:
  map-resolvers: [192.0.2.1]
  static:
    - {eid-prefix: 10.3.0.0/16}
    - {eid-prefix: 10.3.0.0/16, action: drop, locators: [{address: 192.0.2.7}]}
    - {eid-prefix: 10.4.0.1/16, action: forward}
    - {eid-prefix: 10.5.0.0/16, instance-id: 16777216, locators: [{elp: [192.0.2.9]}]}
`))
	want := []string{
		"dataplane.keep-on-exit: needs pinning, which pin-path off turns off",
		"map-cache.static[0]: missing: give locators, or an action",
		"map-cache.static[1].eid-prefix: 10.3.0.0/16 is already map-cache.static[0]",
		"map-cache.static[1].action: set with locators",
		"map-cache.static[2].eid-prefix: 10.4.0.1/16 has host bits set",
		`map-cache.static[2].action: "forward" is not one of`,
		"map-cache.static[3].instance-id: 16777216 exceeds the 24 bits",
		"map-cache.static[3].locators[0].elp: an ELP has at least two hops",
	}
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("no error %q in:\n%s", w, err)
		}
	}
	if n := len(err.(Errors)); n != len(want) {
		t.Errorf("%d errors, want %d:\n%s", n, len(want), err)
	}
	if _, err := Parse([]byte("roles: [rtr]\ndataplane: {rloc-interfaces: [eth0], pin-path: bpf/x}\nmap-cache: {map-resolvers: [192.0.2.1]}\n")); err == nil ||
		!strings.Contains(err.Error(), `dataplane.pin-path: "bpf/x" is not an absolute path (or off)`) {
		t.Errorf("relative pin-path: %v", err)
	}
}

// stateful is an xTR that binds subflows statefully, with more of its
// map-server's settings.
func stateful(ms string) string {
	return `
roles: [xtr]
dataplane: {eid-interfaces: [e1], rloc-interfaces: [e0], mptcp-subflows: bind-stateful}
map-cache: {map-resolvers: [192.0.2.1], elp-bits: as-sent}
xtr:
  database-mappings: [{eid-prefix: 10.1.0.0/16, locators: [{address: 192.0.2.9}]}]
  map-servers: [{address: 192.0.2.1, secret: s, ` + ms + `}]
`
}

// A stateful xTR's map-servers forward the Map-Requests to its ETR,
// which chooses each subflow's ELP.
func TestStatefulXTR(t *testing.T) {
	c, err := Parse([]byte(stateful("proxy-reply: false")))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Dataplane.Stateful() || c.MapCache.ELPBits != "as-sent" {
		t.Errorf("dataplane %+v, map-cache %+v", c.Dataplane, c.MapCache)
	}
	c, err = Parse([]byte(rtrExample))
	if err != nil || c.Dataplane.Stateful() || c.MapCache.ELPBits != "all-strict" {
		t.Errorf("rtr example: %v, %+v %+v", err, c.Dataplane, c.MapCache)
	}
}

func TestTunnelErrors(t *testing.T) {
	_, err := Parse([]byte(`
roles: [xtr]
dataplane: {rloc-interfaces: [eth0, eth0, eth1], miss: queue, instance-id: 16777216, source-selection: port-sum, rloc-gateways: {eth0: 192.0.2.9, eth7: gw}, complete-checksums: [eth1, eth9], xdp-interfaces: [eth8], lisp-gpe: {peers: [10.0.0.0/8, 192.0.2.7, 10.0.0.0/33]}}
map-cache: {map-resolvers: [resolver], request-timeout: -1s, max-entries: -1, probe-interval: 1ms, probe-misses: -2, hold-per-eid: 9, hold-total: 8}
xtr:
  xtr-id: abc
  register-interval: 10ms
  database-mappings:
    - eid-prefix: 10.1.0.0/16
      ttl: 90s
      locators: [{address: 192.0.2.1, elp: [192.0.2.2, 192.0.2.3]}, {elp: [192.0.2.2]}, {address: nowhere}, {}]
    - eid-prefix: 10.1.0.0/16
      locators: [{elp: [192.0.2.2, banana]}]
  map-servers: [{address: 192.0.2.1, algorithm: md5}]
`))
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	want := []string{
		"dataplane.eid-interfaces: missing",
		"dataplane.rloc-interfaces[1]: eth0 is already dataplane.rloc-interfaces[0]",
		"dataplane.instance-id: 16777216 exceeds the 24 bits",
		`dataplane.miss: "queue" is not one of [hold drop native-forward]`,
		"dataplane.rloc-gateways.eth7: eth7 is not one of rloc-interfaces",
		`dataplane.rloc-gateways.eth7: "gw" is not an IP address`,
		"dataplane.rloc-gateways: missing the gateway of eth1 (rloc-interfaces[2])",
		`dataplane.complete-checksums[1]: "eth9" is not one of rloc-interfaces`,
		`dataplane.xdp-interfaces[0]: "eth8" is not one of rloc-interfaces`,
		`dataplane.lisp-gpe.peers[2]: "10.0.0.0/33" is not an IP prefix or address`,
		`map-cache.map-resolvers[0]: "resolver" is not an IP address`,
		"map-cache.request-timeout: must be positive",
		"map-cache.max-entries: -1 is not between 1 and",
		"map-cache.probe-interval: must be 0 (off) or at least 10ms",
		"map-cache.probe-misses: must be at least 1",
		"map-cache.hold-per-eid: 9 is not between 1 and hold-total (8)",
		"xtr.database-mappings[0].ttl: 1m30s is not a whole number of minutes",
		"xtr.database-mappings[0].locators[0]: address and elp both set",
		"xtr.database-mappings[0].locators[1].elp: an ELP has at least two hops",
		`xtr.database-mappings[0].locators[2].address: "nowhere" is not an IP address`,
		"xtr.database-mappings[0].locators[3]: missing: give an address or an elp",
		"xtr.database-mappings[1].eid-prefix: 10.1.0.0/16 is already xtr.database-mappings[0]",
		`xtr.database-mappings[1].locators[0].elp[1].address: "banana" is not an IP address`,
		`xtr.map-servers[0].algorithm: "md5" is not hmac-sha256 or hmac-sha1`,
		"xtr.map-servers[0]: secret: missing",
		"xtr.register-interval: must be at least 1s",
		`xtr.xtr-id: "abc" is not 32 hex digits`,
	}
	text := err.Error()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("no error %q in:\n%s", w, text)
		}
	}
	if n := len(err.(Errors)); n != len(want) {
		t.Errorf("%d errors, want %d:\n%s", n, len(want), text)
	}

	for yaml, want := range map[string]string{
		"roles: [rtr]\ndataplane: {rloc-interfaces: [eth0], eid-interfaces: [eth1]}\nmap-cache: {map-resolvers: [192.0.2.1]}\n":                "dataplane.eid-interfaces: only the xtr role has EID interfaces",
		"roles: [rtr]\ndataplane: {rloc-interfaces: [eth0]}\nmap-cache: {map-resolvers: [192.0.2.1]}\nxtr: {}\n":                               "xtr: set, but the xtr role is not in roles",
		"roles: [map-server]\nmap-server: {sites: [{name: a, keys: [{secret: s}], eid-prefixes: [{prefix: 10.0.0.0/8}]}]}\nmap-cache: {}\n":    "map-cache: set, but neither the xtr nor the rtr role is in roles",
		"roles: [xtr]\ndataplane: {eid-interfaces: [e1], rloc-interfaces: [e0]}\nmap-cache: {map-resolvers: [192.0.2.1]}\n":                    "xtr: missing",
		"roles: [xtr]\ndataplane: {eid-interfaces: [e1], rloc-interfaces: [e0]}\nmap-cache: {map-resolvers: [192.0.2.1]}\nxtr: {site-id: 3}\n": "xtr.site-id: set without xtr-id",
		"roles: [rtr]\ndataplane: {rloc-interfaces: [e0]}\nmap-cache: {map-resolvers: [192.0.2.1], elp-bits: some}\n":                          `map-cache.elp-bits: "some" is not one of [all-strict as-sent]`,
		"roles: [rtr]\ndataplane: {rloc-interfaces: [e0], mptcp-subflows: stateful}\nmap-cache: {map-resolvers: [192.0.2.1]}\n":                `dataplane.mptcp-subflows: "stateful" is not one of [bind bind-stateful off]`,
		stateful("proxy-reply: true"): "xtr.map-servers[0].proxy-reply: true with mptcp-subflows bind-stateful",
	} {
		if _, err := Parse([]byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
}

// LISP-GPE goes to the peers named, an address alone being a host prefix;
// GRO is on unless turned off.
func TestLISPGPE(t *testing.T) {
	const rtr = "roles: [rtr]\nmap-cache: {map-resolvers: [192.0.2.1]}\ndataplane: {rloc-interfaces: [eth0]"
	c, err := Parse([]byte(rtr + ", lisp-gpe: {peers: [10.0.0.0/8, 192.0.2.7, '2001:db8::1:0/112', '::ffff:198.51.100.1']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gpe := c.Dataplane.LISPGPE
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::1:0/112"), netip.MustParsePrefix("198.51.100.1/32")}
	if got := gpe.PeerPrefixes(); !slices.Equal(got, want) || !gpe.GROOn() {
		t.Errorf("peers %v (want %v), GRO %v", got, want, gpe.GROOn())
	}
	c, err = Parse([]byte(rtr + ", lisp-gpe: {gro: false}}\n"))
	if err != nil || c.Dataplane.LISPGPE.GROOn() || c.Dataplane.LISPGPE.PeerPrefixes() != nil {
		t.Errorf("gro: false: %v, %+v", err, c.Dataplane.LISPGPE)
	}
}
