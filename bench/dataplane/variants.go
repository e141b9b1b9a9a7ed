package dataplane

// Variant is one data path the bench measures.
type Variant struct {
	Name string `json:"name"`
	// Routers on the path: 2 (r1, r3) or 3 (r1, r2, r3).
	Routers int `json:"routers"`
	// Reference is the variant this one is compared with ("" for the
	// references themselves).
	Reference   string `json:"reference,omitempty"`
	Description string `json:"description"`
	// Extra variants are measured only when named (--variants).
	Extra bool `json:"extra,omitempty"`
	kind  kind
}

type kind uint8

const (
	kindPlain kind = iota
	kindVXLAN
	kindLISP
	kindLISPRTR
	kindPlainXDP
)

// Variants are every data path the bench knows, in the order it measures
// them.
var Variants = []Variant{
	{Name: "plain", Routers: 2, kind: kindPlain,
		Description: "IP routing through two routers (r1, r3)"},
	{Name: "plain-3", Routers: 3, kind: kindPlain,
		Description: "IP routing through three routers (r1, r2, r3): the reference of the RTR path"},
	{Name: "vxlan", Routers: 2, Reference: "plain", kind: kindVXLAN,
		Description: "kernel VXLAN (UDP 4789) between r1 and r3, the sites' routes over it"},
	{Name: "lisp", Routers: 2, Reference: "plain", kind: kindLISP,
		Description: "lispd xtr on r1 (ITR) and r3 (ETR), a lispd map-server/map-resolver on its own node off r1"},
	{Name: "lisp-rtr", Routers: 3, Reference: "plain-3", kind: kindLISPRTR,
		Description: "lispd xtr on r1 and r3, lispd rtr on r2; both sites register an ELP through r2"},
	{Name: "plain-xdp", Routers: 2, Reference: "plain", kind: kindPlainXDP, Extra: true,
		Description: "plain routing with a pass-through XDP program on r3's underlay in the profiles where lispd's " +
			"xTRs decapsulate in XDP: what XDP itself costs on a veth (which copies each frame for it)"},
}

// VariantNames are the names of the variants measured by default.
func VariantNames() []string {
	var names []string
	for _, v := range Variants {
		if !v.Extra {
			names = append(names, v.Name)
		}
	}
	return names
}

// allVariantNames are the names of every variant.
func allVariantNames() []string {
	names := make([]string, len(Variants))
	for i, v := range Variants {
		names[i] = v.Name
	}
	return names
}

func variantByName(name string) *Variant {
	for i := range Variants {
		if Variants[i].Name == name {
			return &Variants[i]
		}
	}
	return nil
}

// Profile is how the links offload segmentation and aggregation.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Underlay is what the ends of the links between routers are set
	// to; nil leaves veth's defaults.
	Underlay *Offloads `json:"underlay,omitempty"`
	// XDP: the lisp variants' xTRs decapsulate in XDP on their RLOC
	// interfaces (dataplane.xdp-interfaces), as lispd is configured
	// for an underlay of MTU-sized frames.
	XDP bool `json:"lispd_xdp"`
}

// Profiles are the offload profiles (docs/kernel.md, "eBPF LISP
// forwarding"). Only the links between routers change; the hosts' links
// (client—r1, r3—server) keep veth's defaults in both, as a host with a
// TSO-capable NIC does.
var Profiles = []Profile{
	{Name: "gso",
		Description: "veth defaults on every link (TSO and GSO on, GRO off): 64 KB super-packets cross the whole chain"},
	{Name: "wire", Underlay: &Offloads{TSO: false, GSO: false, GRO: true}, XDP: true,
		Description: "NIC-like underlay: on both ends of every router-to-router link TSO (all variants) and GSO off, " +
			"so that a router segments what it sends there into MTU-sized frames, and GRO on (veth NAPI), " +
			"so that the receiving router aggregates them where the kernel has a GRO handler (TCP, VXLAN; not UDP 4341); " +
			"lispd's xTRs decapsulate in XDP ahead of GRO (xdp-interfaces), so that the inner TCP is aggregated too"},
}

// ProfileNames are the names of Profiles.
func ProfileNames() []string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = p.Name
	}
	return names
}

func profileByName(name string) *Profile {
	for i := range Profiles {
		if Profiles[i].Name == name {
			return &Profiles[i]
		}
	}
	return nil
}

// The address plan, the same in every variant (each has namespaces of
// its own). The sites' EIDs are 192.168.1.0/24 (client) and
// 192.168.2.0/24 (server); the underlay is 10.0.0.0/16.
const (
	clientAddr = "192.168.1.2/24"
	r1Site     = "192.168.1.1/24"
	serverAddr = "192.168.2.2/24"
	r3Site     = "192.168.2.1/24"
	siteA      = "192.168.1.0/24"
	siteB      = "192.168.2.0/24"
	serverIP   = "192.168.2.2"
	clientIP   = "192.168.1.2"

	// Two routers: r1 — r3.
	r1Under13 = "10.0.13.1/24"
	r3Under13 = "10.0.13.3/24"
	// Three routers: r1 — r2 — r3.
	r1Under12 = "10.0.12.1/24"
	r2Under12 = "10.0.12.2/24"
	r2Under23 = "10.0.23.2/24"
	r3Under23 = "10.0.23.3/24"
	// The map-server hangs off r1.
	r1MS   = "10.0.100.1/24"
	msAddr = "10.0.100.2/24"
	msNet  = "10.0.100.0/24"
	// VXLAN's inner link.
	r1VXLAN = "172.16.0.1/24"
	r3VXLAN = "172.16.0.3/24"
	vni     = 42
)
