package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// DDTNode configures the ddt-node role: a node of the Delegated Database
// Tree (RFC 8111), authoritative for some extended EID-prefixes (an
// instance ID and a prefix), which refers map-resolvers to the child DDT
// nodes and map-servers it delegated parts of them to.
type DDTNode struct {
	// AuthoritativePrefixes are the prefixes this node answers for: inside
	// them, an EID no delegation covers is a delegation hole; outside,
	// the node is not authoritative.
	AuthoritativePrefixes []ExtendedPrefix `yaml:"authoritative-prefixes"`
	Delegations           []Delegation     `yaml:"delegations"`
}

// ExtendedPrefix is an extended EID-prefix (RFC 8111's XEID-prefix): an
// IPv4 or IPv6 prefix in an instance ID.
type ExtendedPrefix struct {
	Prefix     string `yaml:"prefix"`
	InstanceID uint32 `yaml:"instance-id"`
}

// Delegation gives a prefix to a child: a DDT node (type ddt-node, whose
// referrals are NODE-REFERRALs) or map-servers (type map-server,
// MS-REFERRALs), each reachable at any of its referral RLOCs.
type Delegation struct {
	Prefix     string     `yaml:"prefix"`
	InstanceID uint32     `yaml:"instance-id"`
	Type       string     `yaml:"type"`
	Referrals  []Referral `yaml:"referrals"`
}

// The delegation types.
const (
	DelegateDDTNode   = "ddt-node"
	DelegateMapServer = "map-server"
)

// Referral is an RLOC of a DDT node or map-server, with the priority and
// weight a map-resolver chooses among a referral set by (the lowest
// priority first). Written as an address, or as {address, priority,
// weight}.
type Referral struct {
	Address  string `yaml:"address"`
	Priority uint8  `yaml:"priority"`
	Weight   uint8  `yaml:"weight"`
}

func (r *Referral) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = Referral{Address: n.Value}
		return nil
	}
	type plain Referral // without this method
	return n.Decode((*plain)(r))
}

// Addr is the referral's address (valid once validated).
func (r Referral) Addr() netip.Addr {
	a, _ := netip.ParseAddr(r.Address)
	return a.Unmap()
}

// MapServerDDT configures how the map-server answers the DDT
// Map-Requests of map-resolvers (RFC 8111 §7.2). Left out, the
// map-server still answers them, authoritative for its sites' prefixes
// and with no peers.
type MapServerDDT struct {
	// AuthoritativePrefixes are the prefixes the DDT tree delegated to
	// this map-server; an EID in one of them but in no site is a
	// delegation hole. Left out: the sites' prefixes.
	AuthoritativePrefixes []ExtendedPrefix `yaml:"authoritative-prefixes"`
	// Peers are every map-server of these prefixes, this one included:
	// the referral set of its MS-ACK and MS-NOT-REGISTERED answers. Without
	// them the answers carry no set and say it is incomplete.
	Peers []Referral `yaml:"peers"`
}

// ResolverDDT configures the map-resolver's resolution through the DDT:
// for an EID no site of this lispd holds, it follows referrals from a
// root DDT node down to the map-server that has it (RFC 8111 §7.3).
type ResolverDDT struct {
	// Root is the referral set of the tree's root.
	Root []Referral `yaml:"root"`
	// RequestTimeout is how long a DDT Map-Request waits for its
	// Map-Referral before it goes to the next RLOC of the referral set;
	// RequestTries how often each RLOC of a set is asked before the
	// request is given up.
	RequestTimeout Duration `yaml:"request-timeout"`
	RequestTries   int      `yaml:"request-tries"`
	// MaxReferrals bounds the referrals one request follows: a longer
	// chain is refused as a loop.
	MaxReferrals int `yaml:"max-referrals"`
	// CacheSize bounds the entries of the referral cache.
	CacheSize int `yaml:"cache-size"`
}

// The DDT defaults.
const (
	DefaultDDTRequestTimeout = 500 * time.Millisecond
	DefaultDDTRequestTries   = 3
	DefaultDDTMaxReferrals   = 16
	DefaultDDTCacheSize      = 100000
	// MaxDDTReferrals bounds max-referrals: a prefix gets strictly more
	// specific at each referral, so no IPv6 chain is longer than 129.
	MaxDDTReferrals = 129
)

func (c *Config) ddtDefaults() {
	if n := c.DDTNode; n != nil {
		for i := range n.Delegations {
			setString(&n.Delegations[i].Type, DelegateDDTNode)
		}
	}
	if mr := c.MapResolver; mr != nil && mr.DDT != nil {
		d := mr.DDT
		setDuration(&d.RequestTimeout, DefaultDDTRequestTimeout)
		if d.RequestTries == 0 {
			d.RequestTries = DefaultDDTRequestTries
		}
		if d.MaxReferrals == 0 {
			d.MaxReferrals = DefaultDDTMaxReferrals
		}
		if d.CacheSize == 0 {
			d.CacheSize = DefaultDDTCacheSize
		}
	}
}

func (c *Config) validateDDT(ck *checker) {
	switch {
	case c.Has(RoleDDTNode) && c.DDTNode == nil:
		ck.add("ddt-node", "missing: the ddt-node role needs its authoritative-prefixes and delegations")
	case !c.Has(RoleDDTNode) && c.DDTNode != nil:
		ck.add("ddt-node", "set, but the ddt-node role is not in roles")
	case c.DDTNode != nil:
		c.DDTNode.validate(ck)
	}
	if ms := c.MapServer; ms != nil && ms.DDT != nil {
		validatePrefixes(ck, "map-server.ddt.authoritative-prefixes", ms.DDT.AuthoritativePrefixes)
		validateReferrals(ck, "map-server.ddt.peers", ms.DDT.Peers)
	}
	if mr := c.MapResolver; mr != nil && mr.DDT != nil {
		mr.DDT.validate(ck)
	}
}

func (n *DDTNode) validate(ck *checker) {
	if len(n.AuthoritativePrefixes) == 0 {
		ck.add("ddt-node.authoritative-prefixes", "missing: a DDT node is authoritative for at least one prefix")
	}
	auth := validatePrefixes(ck, "ddt-node.authoritative-prefixes", n.AuthoritativePrefixes)
	seen := map[ExtendedPrefix]string{}
	for i, d := range n.Delegations {
		path := fmt.Sprintf("ddt-node.delegations[%d]", i)
		if p, ok := checkPrefix(ck, path, ExtendedPrefix{d.Prefix, d.InstanceID}); ok {
			key := ExtendedPrefix{p.String(), d.InstanceID}
			if other, dup := seen[key]; dup {
				ck.add(path+".prefix", "%s is already delegated by %s", xeidString(key), other)
			}
			seen[key] = path
			if !inside(auth, d.InstanceID, p) {
				ck.add(path+".prefix", "%s is inside no authoritative-prefix: a node delegates only what it is authoritative for",
					xeidString(key))
			}
		}
		oneOf(ck, path+".type", d.Type, DelegateDDTNode, DelegateMapServer)
		if len(d.Referrals) == 0 {
			ck.add(path+".referrals", "missing: a delegation needs the address of at least one child")
		}
		validateReferrals(ck, path+".referrals", d.Referrals)
	}
}

func (d *ResolverDDT) validate(ck *checker) {
	if len(d.Root) == 0 {
		ck.add("map-resolver.ddt.root", "missing: the addresses of the root DDT nodes")
	}
	validateReferrals(ck, "map-resolver.ddt.root", d.Root)
	if d.RequestTimeout.Duration < 10*time.Millisecond {
		ck.add("map-resolver.ddt.request-timeout", "must be at least 10ms")
	}
	if d.RequestTries < 1 {
		ck.add("map-resolver.ddt.request-tries", "must be at least 1")
	}
	if d.MaxReferrals < 1 || d.MaxReferrals > MaxDDTReferrals {
		ck.add("map-resolver.ddt.max-referrals", "%d is not between 1 and %d", d.MaxReferrals, MaxDDTReferrals)
	}
	if d.CacheSize < 1 {
		ck.add("map-resolver.ddt.cache-size", "must be at least 1")
	}
}

// validatePrefixes checks a list of extended prefixes and returns the
// valid ones.
func validatePrefixes(ck *checker, path string, list []ExtendedPrefix) []ExtendedPrefix {
	var ok []ExtendedPrefix
	for i, e := range list {
		if p, valid := checkPrefix(ck, fmt.Sprintf("%s[%d]", path, i), e); valid {
			ok = append(ok, ExtendedPrefix{p.String(), e.InstanceID})
		}
	}
	return ok
}

// checkPrefix checks one extended prefix, at path.prefix and
// path.instance-id.
func checkPrefix(ck *checker, path string, e ExtendedPrefix) (netip.Prefix, bool) {
	p, err := (EIDPrefix{Prefix: e.Prefix}).Parse()
	if err != nil {
		ck.add(path+".prefix", "%v", err)
		return p, false
	}
	if e.InstanceID > 0xffffff {
		ck.add(path+".instance-id", "%d exceeds the 24 bits of an instance ID", e.InstanceID)
		return p, false
	}
	return p, true
}

func validateReferrals(ck *checker, path string, list []Referral) {
	seen := map[netip.Addr]bool{}
	for i, r := range list {
		a, err := netip.ParseAddr(r.Address)
		switch {
		case err != nil:
			ck.add(fmt.Sprintf("%s[%d].address", path, i), "%q is not an IP address", r.Address)
		case seen[a.Unmap()]:
			ck.add(fmt.Sprintf("%s[%d].address", path, i), "%s is listed twice", a)
		}
		seen[a.Unmap()] = true
	}
	if len(list) > 255 {
		ck.add(path, "%d addresses: a referral set holds at most 255", len(list))
	}
}

// inside reports whether prefix p of instance iid lies in one of list.
func inside(list []ExtendedPrefix, iid uint32, p netip.Prefix) bool {
	for _, e := range list {
		q, _ := netip.ParsePrefix(e.Prefix)
		if e.InstanceID == iid && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func xeidString(e ExtendedPrefix) string {
	if e.InstanceID == 0 {
		return e.Prefix
	}
	return "[" + strconv.FormatUint(uint64(e.InstanceID), 10) + "]" + e.Prefix
}
