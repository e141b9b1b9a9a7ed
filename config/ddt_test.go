package config

import (
	"strings"
	"testing"
	"time"
)

// ddtNodeExample is a DDT node authoritative for 10.0.0.0/8 and all of
// instance 1000's IPv4 space, which delegates two /16s to child DDT
// nodes (two RLOCs each) and one to a pair of map-servers.
const ddtNodeExample = `
roles: [ddt-node]
ddt-node:
  authoritative-prefixes:
    - prefix: 10.0.0.0/8
    - {prefix: 0.0.0.0/0, instance-id: 1000}
  delegations:
    - prefix: 10.1.0.0/16
      referrals: [192.0.2.11, {address: 192.0.2.12, priority: 2}]
    - {prefix: 10.2.0.0/16, referrals: [192.0.2.21, 192.0.2.22]}
    - {prefix: 10.3.0.0/16, instance-id: 1000, type: map-server, referrals: [192.0.2.31]}
`

func TestDDTNodeExample(t *testing.T) {
	c, err := Parse([]byte(ddtNodeExample))
	if err != nil {
		t.Fatal(err)
	}
	n := c.DDTNode
	if len(n.AuthoritativePrefixes) != 2 || len(n.Delegations) != 3 {
		t.Fatalf("ddt-node = %+v", n)
	}
	d := n.Delegations
	if d[0].Type != DelegateDDTNode || d[2].Type != DelegateMapServer || d[2].InstanceID != 1000 {
		t.Errorf("delegation types = %q %q %q", d[0].Type, d[1].Type, d[2].Type)
	}
	if r := d[0].Referrals[1]; r.Address != "192.0.2.12" || r.Priority != 2 || r.Addr().String() != "192.0.2.12" {
		t.Errorf("second referral = %+v", r)
	}
}

func TestResolverDDTDefaults(t *testing.T) {
	c, err := Parse([]byte("roles: [map-resolver]\nmap-resolver: {ddt: {root: [192.0.2.1]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.MapResolver.DDT
	if d.RequestTimeout.Duration != 500*time.Millisecond || d.RequestTries != 3 || d.MaxReferrals != 16 || d.CacheSize != 100000 {
		t.Errorf("defaults = %+v", d)
	}
}

// Every DDT problem is named by its path, all at once.
func TestDDTValidation(t *testing.T) {
	_, err := Parse([]byte(`
roles: [ddt-node, map-server, map-resolver]
ddt-node:
  authoritative-prefixes: [{prefix: 10.0.0.0/8}, {prefix: 10.0.0.1/8}, {prefix: 0.0.0.0/0, instance-id: 16777216}]
  delegations:
    - {prefix: 10.1.0.0/16, referrals: [192.0.2.1, 192.0.2.1]}
    - {prefix: 10.1.0.0/16, type: etr, referrals: [not-an-address]}
    - {prefix: 11.0.0.0/16, referrals: []}
map-server:
  sites: [{name: a, keys: [{id: 0, secret: s}], eid-prefixes: [{prefix: 10.1.0.0/16}]}]
  ddt: {authoritative-prefixes: [{prefix: banana}], peers: [192.0.2.300]}
map-resolver:
  ddt: {root: [], request-timeout: 1ms, request-tries: -1, max-referrals: 200, cache-size: -5}
`))
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{
		"ddt-node.authoritative-prefixes[1].prefix: 10.0.0.1/8 has host bits set",
		"ddt-node.authoritative-prefixes[2].instance-id: 16777216 exceeds the 24 bits",
		"ddt-node.delegations[0].referrals[1].address: 192.0.2.1 is listed twice",
		"ddt-node.delegations[1].prefix: 10.1.0.0/16 is already delegated by ddt-node.delegations[0]",
		`ddt-node.delegations[1].type: "etr" is not one of [ddt-node map-server]`,
		`ddt-node.delegations[1].referrals[0].address: "not-an-address" is not an IP address`,
		"ddt-node.delegations[2].prefix: 11.0.0.0/16 is inside no authoritative-prefix",
		"ddt-node.delegations[2].referrals: missing",
		`map-server.ddt.authoritative-prefixes[0].prefix: "banana" is not a prefix`,
		`map-server.ddt.peers[0].address: "192.0.2.300" is not an IP address`,
		"map-resolver.ddt.root: missing",
		"map-resolver.ddt.request-timeout: must be at least 10ms",
		"map-resolver.ddt.request-tries: must be at least 1",
		"map-resolver.ddt.max-referrals: 200 is not between 1 and 129",
		"map-resolver.ddt.cache-size: must be at least 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestDDTNodeRoleAndBlock(t *testing.T) {
	if _, err := Parse([]byte("roles: [ddt-node]\n")); err == nil || !strings.Contains(err.Error(), "ddt-node: missing") {
		t.Errorf("role without block: %v", err)
	}
	_, err := Parse([]byte("roles: [map-resolver]\nddt-node: {authoritative-prefixes: [{prefix: 10.0.0.0/8}]}\n"))
	if err == nil || !strings.Contains(err.Error(), "ddt-node: set, but the ddt-node role is not in roles") {
		t.Errorf("block without role: %v", err)
	}
}
