package config

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Dataplane configures the eBPF forwarding of the xtr and rtr roles.
type Dataplane struct {
	// EIDInterfaces face the site's hosts: the ITR takes their packets
	// (xtr role only).
	EIDInterfaces []string `yaml:"eid-interfaces"`
	// RLOCInterfaces face the underlay: encapsulated packets arrive there
	// for the ETR and the RTR, and leave by them. Their addresses are the
	// router's RLOCs.
	RLOCInterfaces []string `yaml:"rloc-interfaces"`
	// InstanceID of the EIDs behind eid-interfaces; when not 0 the ITR
	// sets the I bit and carries it in the data header.
	InstanceID uint32 `yaml:"instance-id"`
	// PathSelection picks among a mapping's best paths for packets not
	// bound to a path by their MPTCP subflow: "hash" (by weight, on a
	// hash of the 5-tuple) or "port-sum" (index = (source port +
	// destination port) mod the number of paths, [A-MPTCP]).
	PathSelection string `yaml:"path-selection"`
	// SourceSelection is how the ITR picks its own RLOC, and so the RLOC
	// interface a packet leaves by: "routing" (the kernel's route to the
	// destination RLOC) or "port-sum" (index = (source port + destination
	// port) mod the number of RLOC interfaces, in their order: the
	// multihomed data centre of [A-MPTCP], whose downloads are spread
	// over its own RLOCs). port-sum sends to a gateway per RLOC interface.
	SourceSelection string `yaml:"source-selection"`
	// RLOCGateways are the next hops of the RLOC interfaces (by name) for
	// source-selection port-sum: an IPv4 or IPv6 address each.
	RLOCGateways map[string]string `yaml:"rloc-gateways"`
	// MPTCPSubflows "bind" gives each MPTCP subflow of a connection its own
	// path and keeps it there ([LISP-TE] §IV.B, stateless: the ITR
	// chooses); "bind-stateful" has the destination's ETR choose each
	// subflow's ELP ([LISP-TE] §IV.A): the ITR asks it with an
	// Application Data Map-Request per new subflow, and the ETR answers
	// those of its own site; "off" treats them as any flow.
	MPTCPSubflows string `yaml:"mptcp-subflows"`
	// PathID is how an RTR learns which ELP a packet follows:
	// "data-header" (the ITR writes the path's index into the LISP header)
	// or "previous-hop" (the outer source address, for link-disjoint ELPs).
	PathID string `yaml:"path-id"`
	// Miss is what the ITR does with packets while their mapping is being
	// resolved: "hold" (lispd holds them, within map-cache.hold-per-eid
	// and hold-total, and sends them on, in order, as soon as the
	// Map-Reply is installed), "drop" or "native-forward".
	Miss string `yaml:"miss"`
	// SubflowIdleTimeout removes a subflow that sent nothing for so long.
	SubflowIdleTimeout Duration `yaml:"subflow-idle-timeout"`
	// ClampMSS lowers the MSS of the TCP SYNs the ITR encapsulates so that
	// segments fit the underlay's MTU once encapsulated. On by default.
	ClampMSS *bool `yaml:"clamp-mss"`
	// CompleteChecksums are RLOC interfaces by which packets leave
	// complete: every checksum computed and GSO packets segmented, by the
	// kernel. lispd turns their transmit checksum offload off while it
	// runs. For a veth to an xTR that decapsulates in user space on the
	// same machine: a veth passes the host's unfinished checksums and
	// GSO super-packets on to the other namespace, whose UDP socket
	// delivers them unfinished (docs/routers.md).
	CompleteChecksums []string `yaml:"complete-checksums"`
	// XDPInterfaces are RLOC interfaces where the ETR decapsulates in XDP,
	// in the driver ahead of GRO, so that the inner TCP is aggregated as
	// a router aggregates what it forwards: for interfaces that receive
	// MTU-sized frames (a NIC, a veth whose peer does not segment), where
	// every LISP packet would otherwise cross the stack alone. It needs
	// a driver with native XDP. On a veth it turns segmentation offload
	// off on the peer (docs/routers.md, Performance).
	XDPInterfaces []string `yaml:"xdp-interfaces"`
	// LISPGPE is what the data plane sends and receives of LISP-GPE.
	LISPGPE LISPGPE `yaml:"lisp-gpe"`
	// PinPath is the directory, on a BPF file system, where the data
	// plane is pinned so that a restart of lispd keeps it forwarding and
	// the next lispd adopts it (docs/routers.md). Left out, a directory
	// under /sys/fs/bpf/amptcp named after the network namespace; "off"
	// detaches the data plane at every exit.
	PinPath string `yaml:"pin-path"`
	// KeepOnExit leaves the data plane forwarding, pinned, when lispd
	// exits on SIGTERM or SIGINT too, for a supervisor that restarts
	// lispd by stopping and starting it; `lispd stop` then stops for
	// good. Off by default: only `lispd restart` keeps it.
	KeepOnExit bool `yaml:"keep-on-exit"`
}

// LISPGPE configures LISP-GPE (RFC 9305): a data header whose P bit says
// that a next-protocol field, the payload's type, stands where RFC 9300
// puts a nonce. The packets of a flow then have equal headers, which the
// Linux kernel aggregates on receipt (GRO) as it does VXLAN-GPE's: on an
// underlay of MTU-sized frames, the ETR and the RTR take tens of packets
// at once where each would otherwise cross the stack alone.
type LISPGPE struct {
	// Peers are the RLOCs, as prefixes, of the ETRs and RTRs that accept
	// LISP-GPE: the ITR encapsulates towards them, and the RTR sends on
	// to them, with LISP-GPE headers, and with RFC 9300's to every other
	// RLOC, as RFC 9305 requires of a router that has not said it takes
	// LISP-GPE (lispd's routers all do). 0.0.0.0/0 and ::/0 name them
	// all. Default: none.
	Peers []string `yaml:"peers"`
	// GRO aggregates the LISP-GPE packets that reach the RLOC interfaces
	// before the ETR and the RTR see them (Linux 6.5 or later, with
	// VXLAN): lispd creates a VXLAN-GPE device, lispgro, whose UDP socket
	// on port 4341 gives the kernel's GRO what it needs, and drops what
	// that socket would receive itself. It needs GRO on the interfaces
	// (a NIC's default; `ethtool -K IF gro on` on a veth). On by default;
	// where the kernel lacks it lispd says so and runs without.
	GRO *bool `yaml:"gro"`
}

// GROOn says whether the data plane aggregates LISP-GPE (lisp-gpe.gro).
func (g *LISPGPE) GROOn() bool { return g.GRO == nil || *g.GRO }

// PeerPrefixes are the parsed lisp-gpe.peers; Validate has checked them.
func (g *LISPGPE) PeerPrefixes() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range g.Peers {
		if p, err := parsePeer(s); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// parsePeer reads a prefix of lisp-gpe.peers; an address alone is a host
// prefix.
func parsePeer(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// Stateful says whether the destinations' ETRs bind subflows to ELPs
// (mptcp-subflows bind-stateful).
func (dp *Dataplane) Stateful() bool { return dp.MPTCPSubflows == "bind-stateful" }

// MapCache configures how tunnel routers resolve and keep mappings.
type MapCache struct {
	// MapResolvers receive the Encapsulated Map-Requests, tried in turn.
	MapResolvers []string `yaml:"map-resolvers"`
	// RequestTimeout is how long a Map-Request waits for its reply before
	// it is sent again (to the next map-resolver), RequestRetries times.
	RequestTimeout Duration `yaml:"request-timeout"`
	RequestRetries int      `yaml:"request-retries"`
	// MissInterval is how often the data plane reports the same missing
	// EID while packets to it keep coming.
	MissInterval Duration `yaml:"miss-interval"`
	// MaxEntries bounds the map-cache (the size of its BPF maps).
	MaxEntries int `yaml:"max-entries"`
	// HoldPerEID and HoldTotal bound the packets an ITR holds while it
	// resolves their mappings (dataplane.miss hold): per destination EID,
	// and in all. Beyond them packets are dropped, and counted.
	HoldPerEID int `yaml:"hold-per-eid"`
	HoldTotal  int `yaml:"hold-total"`
	// ProbeInterval is how often every locator in use is RLOC-probed; 0
	// turns probing off. A locator is down after ProbeMisses unanswered
	// probes in a row and up again at the first answer.
	ProbeInterval *Duration `yaml:"probe-interval"`
	ProbeMisses   int       `yaml:"probe-misses"`
	// ProbePeers are addresses probed besides the locators in use: the
	// router's neighbours in the overlay, whose RTTs make its row of the
	// RTT matrix that the te role reads (docs/te.md).
	ProbePeers []string `yaml:"probe-peers"`
	// ELPBits says what the P and S bits of an Explicit Locator Path's
	// hops do: "all-strict" (the default) probes every hop and takes the
	// path down when one is down, whatever the bits; "as-sent" follows
	// them (RFC 8060): only hops with the P bit are probed, and a hop
	// found down without the S bit is gone around (the path goes on
	// from the hop before it to the hop after).
	ELPBits string `yaml:"elp-bits"`
	// Static are entries given here rather than resolved: they never
	// expire and Map-Replies do not replace them; a reload (SIGHUP)
	// applies their changes.
	Static []StaticMapping `yaml:"static"`
}

// StaticMapping is a map-cache entry of the configuration: an EID-prefix
// and its locators (plain RLOCs and ELPs, in the order of their path
// IDs), or, without locators, what to do with its packets.
type StaticMapping struct {
	EIDPrefix string `yaml:"eid-prefix"`
	// InstanceID of the prefix; left out, dataplane.instance-id.
	InstanceID *uint32         `yaml:"instance-id"`
	Locators   []LocatorConfig `yaml:"locators"`
	// Action of an entry without locators: natively-forward, drop or
	// send-map-request.
	Action string `yaml:"action"`
}

// XTR configures what the xtr role registers and with whom.
type XTR struct {
	DatabaseMappings []DatabaseMapping `yaml:"database-mappings"`
	MapServers       []MapServerRef    `yaml:"map-servers"`
	// RegisterInterval is how often registrations are refreshed
	// (RFC 9301: every minute).
	RegisterInterval Duration `yaml:"register-interval"`
	// XTRID (32 hex digits) and SiteID, when XTRID is set, go in the
	// Map-Registers (the I bit, RFC 9437): the map-server then tells this
	// xTR from the other xTRs of its site by them, not by its address.
	XTRID  string `yaml:"xtr-id"`
	SiteID uint64 `yaml:"site-id"`
	// Merge registers this xTR's locators as its part of the site's (the
	// a bit): the map-server merges the parts of the site's xTRs, and
	// tells the others with a Map-Notify when the merged set changes.
	// Without it, each xTR registers all of the site's locators.
	Merge bool `yaml:"merge"`
	// Join, when set, joins the site to the overlay through its closest
	// RTRs ([SDN-MPTCP]'s overlay join, docs/te.md).
	Join *Join `yaml:"join"`
}

// Join is the overlay join of [SDN-MPTCP] in LISP terms: the xtr probes
// RTRs and registers, before each mapping's configured locators, an ELP
// through each of the Count closest that ends at the mapping's first
// plain RLOC. It chooses again as the RTTs change: at once when a chosen
// RTR goes down, otherwise when a closer set has been found Confirm
// probe intervals in a row and HoldDown after the last change.
type Join struct {
	RTRs     []string `yaml:"rtrs"`
	Count    int      `yaml:"count"`
	Priority uint8    `yaml:"priority"`
	Weight   uint8    `yaml:"weight"`
	Confirm  int      `yaml:"confirm"`
	HoldDown Duration `yaml:"hold-down"`
}

// ID returns the xTR-ID, or nil when none is configured.
func (x *XTR) ID() (*[16]byte, error) {
	if x.XTRID == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(strings.TrimPrefix(x.XTRID, "0x"))
	if err != nil || len(b) != 16 {
		return nil, fmt.Errorf("%q is not 32 hex digits (128 bits)", x.XTRID)
	}
	return (*[16]byte)(b), nil
}

// DatabaseMapping is an EID-prefix of this site and how to reach it.
type DatabaseMapping struct {
	EIDPrefix string `yaml:"eid-prefix"`
	// TTL is the record TTL of the registrations and of Map-Replies.
	TTL      Duration        `yaml:"ttl"`
	Locators []LocatorConfig `yaml:"locators"`
}

// LocatorConfig is one path to a site: a plain RLOC (Address) or an
// Explicit Locator Path through RTRs ending at an RLOC of the site (ELP).
type LocatorConfig struct {
	Address  string   `yaml:"address"`
	ELP      []ELPHop `yaml:"elp"`
	Priority uint8    `yaml:"priority"`
	Weight   uint8    `yaml:"weight"`
}

// ELPHop is a hop of an Explicit Locator Path: written as an address, or
// as {address: ..., lookup: true, probe: true, strict: true}.
type ELPHop struct {
	Address string `yaml:"address"`
	Lookup  bool   `yaml:"lookup"`
	Probe   bool   `yaml:"probe"`
	Strict  bool   `yaml:"strict"`
}

func (h *ELPHop) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*h = ELPHop{Address: n.Value}
		return nil
	}
	type plain ELPHop // without this method
	return n.Decode((*plain)(h))
}

// MapServerRef is a map-server the xtr registers with.
type MapServerRef struct {
	Address    string `yaml:"address"` // address[:port]
	KeyID      uint8  `yaml:"key-id"`
	Algorithm  string `yaml:"algorithm"` // hmac-sha256 (default) or hmac-sha1
	Secret     string `yaml:"secret"`
	SecretFile string `yaml:"secret-file"`
	// ProxyReply asks the map-server to answer Map-Requests for us (the
	// P bit); off, they are forwarded to us.
	ProxyReply bool `yaml:"proxy-reply"`
}

// The tunnel routers' defaults.
const (
	DefaultPathSelection      = "hash"
	DefaultSourceSelection    = "routing"
	DefaultMPTCPSubflows      = "bind"
	DefaultELPBits            = "all-strict"
	DefaultPathID             = "data-header"
	DefaultMiss               = "hold"
	DefaultSubflowIdleTimeout = 10 * time.Minute
	DefaultRequestTimeout     = time.Second
	DefaultRequestRetries     = 2
	DefaultMissInterval       = time.Second
	DefaultMapCacheEntries    = 65536
	DefaultHoldPerEID         = 16
	DefaultHoldTotal          = 1024
	DefaultProbeInterval      = 10 * time.Second
	DefaultProbeMisses        = 3
	DefaultRegisterInterval   = time.Minute
	DefaultRecordTTL          = 24 * time.Hour
	DefaultJoinCount          = 2
)

func (c *Config) tunnelDefaults() {
	tunnel := c.Has(RoleXTR) || c.Has(RoleRTR)
	if tunnel && c.Dataplane == nil {
		c.Dataplane = &Dataplane{}
	}
	if dp := c.Dataplane; dp != nil {
		setString(&dp.PathSelection, DefaultPathSelection)
		setString(&dp.SourceSelection, DefaultSourceSelection)
		setString(&dp.MPTCPSubflows, DefaultMPTCPSubflows)
		setString(&dp.PathID, DefaultPathID)
		setString(&dp.Miss, DefaultMiss)
		setDuration(&dp.SubflowIdleTimeout, DefaultSubflowIdleTimeout)
		if dp.ClampMSS == nil {
			on := true
			dp.ClampMSS = &on
		}
	}
	if tunnel && c.MapCache == nil {
		c.MapCache = &MapCache{}
	}
	if mc := c.MapCache; mc != nil {
		setDuration(&mc.RequestTimeout, DefaultRequestTimeout)
		if mc.RequestRetries == 0 {
			mc.RequestRetries = DefaultRequestRetries
		}
		setDuration(&mc.MissInterval, DefaultMissInterval)
		if mc.MaxEntries == 0 {
			mc.MaxEntries = DefaultMapCacheEntries
		}
		if mc.HoldPerEID == 0 {
			mc.HoldPerEID = DefaultHoldPerEID
		}
		if mc.HoldTotal == 0 {
			mc.HoldTotal = DefaultHoldTotal
		}
		if mc.ProbeMisses == 0 {
			mc.ProbeMisses = DefaultProbeMisses
		}
		setString(&mc.ELPBits, DefaultELPBits)
		if mc.ProbeInterval == nil { // 0 is "off", so only a missing value gets the default
			mc.ProbeInterval = &Duration{DefaultProbeInterval}
		}
	}
	if x := c.XTR; x != nil {
		setDuration(&x.RegisterInterval, DefaultRegisterInterval)
		for i := range x.DatabaseMappings {
			setDuration(&x.DatabaseMappings[i].TTL, DefaultRecordTTL)
		}
		for i := range x.MapServers {
			setString(&x.MapServers[i].Algorithm, DefaultKeyAlgorithm)
		}
		if j := x.Join; j != nil {
			setInt(&j.Count, DefaultJoinCount)
			setInt(&j.Confirm, DefaultTEConfirm)
			setDuration(&j.HoldDown, DefaultTEHoldDown)
			if j.Priority == 0 {
				j.Priority = 1
			}
			if j.Weight == 0 {
				j.Weight = 50
			}
		}
	}
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func (c *Config) validateTunnel(ck *checker) {
	xtr, rtr := c.Has(RoleXTR), c.Has(RoleRTR)
	if c.XTR != nil && !xtr {
		ck.add("xtr", "set, but the xtr role is not in roles")
	}
	if xtr && c.XTR == nil {
		ck.add("xtr", "missing: the xtr role needs its database-mappings and map-servers")
	}
	if dp := c.Dataplane; dp != nil {
		dp.validate(ck, xtr)
	}
	if mc := c.MapCache; mc != nil {
		mc.validate(ck)
	}
	if x := c.XTR; x != nil && xtr {
		x.validate(ck)
		if c.Dataplane != nil && c.Dataplane.MPTCPSubflows == "bind-stateful" {
			for i, ms := range x.MapServers {
				if ms.ProxyReply {
					ck.add(fmt.Sprintf("xtr.map-servers[%d].proxy-reply", i),
						"true with mptcp-subflows bind-stateful: the ETR chooses each subflow's ELP, so the map-server must forward the Map-Requests to it (proxy-reply: false)")
				}
			}
		}
		if x.Join != nil && c.MapCache != nil && c.MapCache.ProbeInterval.Duration == 0 {
			ck.add("xtr.join", "set, but probing is off (map-cache.probe-interval 0): the join chooses RTRs by their RTT")
		}
	}
	if !xtr && !rtr {
		if c.Dataplane != nil {
			ck.add("dataplane", "set, but neither the xtr nor the rtr role is in roles")
		}
		if c.MapCache != nil {
			ck.add("map-cache", "set, but neither the xtr nor the rtr role is in roles")
		}
	}
}

func (dp *Dataplane) validate(ck *checker, xtr bool) {
	if xtr && len(dp.EIDInterfaces) == 0 {
		ck.add("dataplane.eid-interfaces", "missing: the xtr role takes the site's packets on at least one interface")
	}
	if !xtr && len(dp.EIDInterfaces) > 0 {
		ck.add("dataplane.eid-interfaces", "only the xtr role has EID interfaces")
	}
	if len(dp.RLOCInterfaces) == 0 {
		ck.add("dataplane.rloc-interfaces", "missing: a tunnel router needs at least one interface to the underlay")
	}
	seen := map[string]string{}
	for field, list := range map[string][]string{"eid-interfaces": dp.EIDInterfaces, "rloc-interfaces": dp.RLOCInterfaces} {
		for i, name := range list {
			path := fmt.Sprintf("dataplane.%s[%d]", field, i)
			switch {
			case name == "":
				ck.add(path, "empty interface name")
			case seen[name] != "":
				ck.add(path, "%s is already %s", name, seen[name])
			}
			seen[name] = path
		}
	}
	if dp.InstanceID > 0xffffff {
		ck.add("dataplane.instance-id", "%d exceeds the 24 bits of an instance ID", dp.InstanceID)
	}
	oneOf(ck, "dataplane.path-selection", dp.PathSelection, "hash", "port-sum")
	oneOf(ck, "dataplane.source-selection", dp.SourceSelection, "routing", "port-sum")
	dp.validateGateways(ck)
	for _, f := range []struct {
		field string
		names []string
	}{{"complete-checksums", dp.CompleteChecksums}, {"xdp-interfaces", dp.XDPInterfaces}} {
		for i, name := range f.names {
			if !slices.Contains(dp.RLOCInterfaces, name) {
				ck.add(fmt.Sprintf("dataplane.%s[%d]", f.field, i), "%q is not one of rloc-interfaces", name)
			}
		}
	}
	for i, peer := range dp.LISPGPE.Peers {
		if _, err := parsePeer(peer); err != nil {
			ck.add(fmt.Sprintf("dataplane.lisp-gpe.peers[%d]", i), "%q is not an IP prefix or address", peer)
		}
	}
	oneOf(ck, "dataplane.mptcp-subflows", dp.MPTCPSubflows, "bind", "bind-stateful", "off")
	oneOf(ck, "dataplane.path-id", dp.PathID, "data-header", "previous-hop")
	oneOf(ck, "dataplane.miss", dp.Miss, "hold", "drop", "native-forward")
	if dp.SubflowIdleTimeout.Duration < time.Second {
		ck.add("dataplane.subflow-idle-timeout", "must be at least 1s")
	}
	if p := dp.PinPath; p != "" && p != "off" && !filepath.IsAbs(p) {
		ck.add("dataplane.pin-path", "%q is not an absolute path (or off)", p)
	}
	if dp.KeepOnExit && dp.PinPath == "off" {
		ck.add("dataplane.keep-on-exit", "needs pinning, which pin-path off turns off")
	}
}

// validateGateways checks that port-sum source selection has a gateway
// for every RLOC interface, and that every gateway is an address of an
// RLOC interface.
func (dp *Dataplane) validateGateways(ck *checker) {
	for _, name := range slices.Sorted(maps.Keys(dp.RLOCGateways)) {
		path := "dataplane.rloc-gateways." + name
		if !slices.Contains(dp.RLOCInterfaces, name) {
			ck.add(path, "%s is not one of rloc-interfaces", name)
		}
		if _, err := netip.ParseAddr(dp.RLOCGateways[name]); err != nil {
			ck.add(path, "%q is not an IP address", dp.RLOCGateways[name])
		}
	}
	if dp.SourceSelection != "port-sum" {
		return
	}
	for i, name := range dp.RLOCInterfaces {
		if _, ok := dp.RLOCGateways[name]; !ok && name != "" {
			ck.add("dataplane.rloc-gateways", "missing the gateway of %s (rloc-interfaces[%d]): source-selection port-sum sends to it", name, i)
		}
	}
}

func oneOf(ck *checker, path, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		ck.add(path, "%q is not one of %v", v, allowed)
	}
}

func (mc *MapCache) validate(ck *checker) {
	if len(mc.MapResolvers) == 0 {
		ck.add("map-cache.map-resolvers", "missing: a tunnel router asks at least one map-resolver")
	}
	for i, a := range mc.MapResolvers {
		if _, err := ListenAddr(a); err != nil {
			ck.add(fmt.Sprintf("map-cache.map-resolvers[%d]", i), "%v", err)
		}
	}
	if mc.RequestTimeout.Duration <= 0 {
		ck.add("map-cache.request-timeout", "must be positive")
	}
	if mc.RequestRetries < 0 {
		ck.add("map-cache.request-retries", "must not be negative")
	}
	if mc.MissInterval.Duration < time.Millisecond {
		ck.add("map-cache.miss-interval", "must be at least 1ms")
	}
	if mc.MaxEntries < 1 || mc.MaxEntries > 1<<24 {
		ck.add("map-cache.max-entries", "%d is not between 1 and %d", mc.MaxEntries, 1<<24)
	}
	if mc.ProbeInterval.Duration < 0 || (mc.ProbeInterval.Duration > 0 && mc.ProbeInterval.Duration < 10*time.Millisecond) {
		ck.add("map-cache.probe-interval", "must be 0 (off) or at least 10ms")
	}
	if mc.ProbeMisses < 1 {
		ck.add("map-cache.probe-misses", "must be at least 1")
	}
	if mc.HoldTotal < 1 || mc.HoldTotal > 1<<20 {
		ck.add("map-cache.hold-total", "%d is not between 1 and %d", mc.HoldTotal, 1<<20)
	}
	if mc.HoldPerEID < 1 || mc.HoldPerEID > mc.HoldTotal {
		ck.add("map-cache.hold-per-eid", "%d is not between 1 and hold-total (%d)", mc.HoldPerEID, mc.HoldTotal)
	}
	oneOf(ck, "map-cache.elp-bits", mc.ELPBits, "all-strict", "as-sent")
	seen := map[string]string{}
	for i, st := range mc.Static {
		path := fmt.Sprintf("map-cache.static[%d]", i)
		p, err := (EIDPrefix{Prefix: st.EIDPrefix}).Parse()
		if err != nil {
			ck.add(path+".eid-prefix", "%v", err)
		} else if iid := st.InstanceID; iid != nil && *iid > 0xffffff {
			ck.add(path+".instance-id", "%d exceeds the 24 bits of an instance ID", *iid)
		} else {
			k := p.String()
			if st.InstanceID != nil {
				k = fmt.Sprintf("[%d]%s", *st.InstanceID, p)
			}
			if other, ok := seen[k]; ok {
				ck.add(path+".eid-prefix", "%s is already %s", p, other)
			}
			seen[k] = path
		}
		switch {
		case len(st.Locators) == 0 && st.Action == "":
			ck.add(path, "missing: give locators, or an action for a negative entry")
		case len(st.Locators) > 0 && st.Action != "":
			ck.add(path+".action", "set with locators: an entry with locators encapsulates")
		case st.Action != "":
			oneOf(ck, path+".action", st.Action, "natively-forward", "drop", "send-map-request")
		}
		if len(st.Locators) > MaxPaths {
			ck.add(path+".locators", "%d locators: the data plane takes at most %d", len(st.Locators), MaxPaths)
		}
		for j, l := range st.Locators {
			l.validate(ck, fmt.Sprintf("%s.locators[%d]", path, j))
		}
	}
	for i, a := range mc.ProbePeers {
		if _, err := netip.ParseAddr(a); err != nil {
			ck.add(fmt.Sprintf("map-cache.probe-peers[%d]", i), "%q is not an IP address", a)
		}
	}
	if len(mc.ProbePeers) > 0 && mc.ProbeInterval.Duration == 0 {
		ck.add("map-cache.probe-peers", "set, but probing is off (probe-interval 0)")
	}
}

func (x *XTR) validate(ck *checker) {
	if len(x.DatabaseMappings) == 0 {
		ck.add("xtr.database-mappings", "missing: an xtr registers at least one EID-prefix")
	}
	if len(x.DatabaseMappings) > MaxMappings {
		ck.add("xtr.database-mappings", "%d mappings: a Map-Register carries at most %d", len(x.DatabaseMappings), MaxMappings)
	}
	prefixes := map[netip.Prefix]string{}
	for i, m := range x.DatabaseMappings {
		path := fmt.Sprintf("xtr.database-mappings[%d]", i)
		if p, err := (EIDPrefix{Prefix: m.EIDPrefix}).Parse(); err != nil {
			ck.add(path+".eid-prefix", "%v", err)
		} else if other, ok := prefixes[p]; ok {
			ck.add(path+".eid-prefix", "%s is already %s", p, other)
		} else {
			prefixes[p] = path
		}
		if m.TTL.Duration < time.Minute || m.TTL.Duration%time.Minute != 0 {
			ck.add(path+".ttl", "%v is not a whole number of minutes (records carry minutes)", m.TTL.Duration)
		}
		if len(m.Locators) == 0 {
			ck.add(path+".locators", "missing: a mapping needs at least one locator")
		}
		if len(m.Locators) > MaxPaths {
			ck.add(path+".locators", "%d locators: the data plane takes at most %d", len(m.Locators), MaxPaths)
		}
		for j, l := range m.Locators {
			l.validate(ck, fmt.Sprintf("%s.locators[%d]", path, j))
		}
	}
	if len(x.MapServers) == 0 {
		ck.add("xtr.map-servers", "missing: an xtr registers with at least one map-server")
	}
	for i, ms := range x.MapServers {
		path := fmt.Sprintf("xtr.map-servers[%d]", i)
		if _, err := ListenAddr(ms.Address); err != nil {
			ck.add(path+".address", "%v", err)
		}
		if _, err := AuthAlgorithm(ms.Algorithm); err != nil {
			ck.add(path+".algorithm", "%v", err)
		}
		if _, err := (Key{Secret: ms.Secret, SecretFile: ms.SecretFile}).Bytes(); err != nil {
			ck.add(path, "%v", err)
		}
	}
	if x.RegisterInterval.Duration < time.Second {
		ck.add("xtr.register-interval", "must be at least 1s")
	}
	if _, err := x.ID(); err != nil {
		ck.add("xtr.xtr-id", "%v", err)
	}
	if x.SiteID != 0 && x.XTRID == "" {
		ck.add("xtr.site-id", "set without xtr-id: they are sent together")
	}
	if j := x.Join; j != nil {
		j.validate(ck, x)
	}
}

func (j *Join) validate(ck *checker, x *XTR) {
	if len(j.RTRs) == 0 {
		ck.add("xtr.join.rtrs", "missing: the join measures at least one RTR")
	}
	for i, a := range j.RTRs {
		if _, err := netip.ParseAddr(a); err != nil {
			ck.add(fmt.Sprintf("xtr.join.rtrs[%d]", i), "%q is not an IP address", a)
		}
	}
	if j.Count < 1 || j.Count > MaxPaths {
		ck.add("xtr.join.count", "%d is not between 1 and %d", j.Count, MaxPaths)
	}
	if j.Priority == 255 {
		ck.add("xtr.join.priority", "255 is \"do not use\"")
	}
	if j.Confirm < 1 {
		ck.add("xtr.join.confirm", "must be at least 1")
	}
	if j.HoldDown.Duration < 0 {
		ck.add("xtr.join.hold-down", "must not be negative")
	}
	for i, m := range x.DatabaseMappings {
		path := fmt.Sprintf("xtr.database-mappings[%d]", i)
		if !slices.ContainsFunc(m.Locators, func(l LocatorConfig) bool { return l.Address != "" }) {
			ck.add(path+".locators", "no plain RLOC for the join's ELPs to end at")
		}
		if len(m.Locators)+j.Count > MaxPaths {
			ck.add(path+".locators", "%d locators and %d ELPs of the join: the data plane takes at most %d", len(m.Locators), j.Count, MaxPaths)
		}
	}
}

// MaxPaths is how many locators (RLOCs and ELPs) a mapping may have in
// the data plane; MaxHops how many hops an ELP may have; MaxMappings how
// many EID-records one Map-Register carries (an 8-bit count).
const (
	MaxPaths    = 8
	MaxHops     = 8
	MaxMappings = 255
)

func (l LocatorConfig) validate(ck *checker, path string) {
	switch {
	case l.Address == "" && len(l.ELP) == 0:
		ck.add(path, "missing: give an address or an elp")
	case l.Address != "" && len(l.ELP) > 0:
		ck.add(path, "address and elp both set: a locator is one or the other")
	case l.Address != "":
		if _, err := netip.ParseAddr(l.Address); err != nil {
			ck.add(path+".address", "%q is not an IP address", l.Address)
		}
	default:
		if len(l.ELP) < 2 {
			ck.add(path+".elp", "an ELP has at least two hops (RTRs, then the ETR)")
		}
		if len(l.ELP) > MaxHops {
			ck.add(path+".elp", "%d hops: the data plane takes at most %d", len(l.ELP), MaxHops)
		}
		for k, h := range l.ELP {
			if _, err := netip.ParseAddr(h.Address); err != nil {
				ck.add(fmt.Sprintf("%s.elp[%d].address", path, k), "%q is not an IP address", h.Address)
			}
		}
	}
}

// Addr is the locator's RLOC: its address, or the last hop of its ELP.
func (l LocatorConfig) Addr() netip.Addr {
	s := l.Address
	if len(l.ELP) > 0 {
		s = l.ELP[len(l.ELP)-1].Address
	}
	a, _ := netip.ParseAddr(s)
	return a
}
