package dataplane

import "slices"

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
	// Profiles the variant is measured in; none: all of them.
	Profiles []string `json:"profiles,omitempty"`
	kind     kind
}

// lispd says whether the variant runs lispd.
func (v *Variant) lispd() bool {
	return v.kind == kindLISP || v.kind == kindLISPRTR || v.kind == kindLISPXDP
}

// in says whether the variant is measured in profile.
func (v *Variant) in(profile string) bool {
	return len(v.Profiles) == 0 || slices.Contains(v.Profiles, profile)
}

type kind uint8

const (
	kindPlain kind = iota
	kindVXLAN
	kindLISP
	kindLISPRTR
	kindPlainXDP
	kindLISPXDP
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
		Description: "lispd xtr on r1 (ITR) and r3 (ETR), LISP-GPE between them (aggregated by GRO where frames are " +
			"MTU-sized), a lispd map-server/map-resolver on its own node off r1"},
	{Name: "lisp-rtr", Routers: 3, Reference: "plain-3", kind: kindLISPRTR,
		Description: "lispd xtr on r1 and r3, lispd rtr on r2, LISP-GPE between them; both sites register an ELP through r2"},
	{Name: "plain-xdp", Routers: 2, Reference: "plain", kind: kindPlainXDP, Extra: true, Profiles: []string{"wire"},
		Description: "plain routing with a pass-through XDP program on r3's underlay: what XDP itself costs on a veth " +
			"(which copies each frame for it)"},
	{Name: "lisp-xdp", Routers: 2, Reference: "plain", kind: kindLISPXDP, Extra: true, Profiles: []string{"wire"},
		Description: "lisp with RFC 9300 headers, decapsulated in XDP ahead of GRO on r3 (xdp-interfaces) rather than " +
			"aggregated as LISP-GPE: the choice for a NIC with native XDP, which a veth's copy for XDP does not show"},
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
}

// Profiles are the offload profiles (docs/kernel.md, "eBPF LISP
// forwarding"). Only the links between routers change; the hosts' links
// (client—r1, r3—server) keep veth's defaults in both, as a host with a
// TSO-capable NIC does.
var Profiles = []Profile{
	{Name: "gso",
		Description: "veth defaults on every link (TSO and GSO on, GRO off): 64 KB super-packets cross the whole chain"},
	{Name: "wire", Underlay: &Offloads{TSO: false, GSO: false, GRO: true},
		Description: "NIC-like underlay: on both ends of every router-to-router link TSO (all variants) and GSO off, " +
			"so that a router segments what it sends there into MTU-sized frames, and GRO on (veth NAPI), " +
			"so that the receiving router aggregates them where the kernel has a GRO handler: TCP, VXLAN, " +
			"and LISP-GPE through lispd's VXLAN-GPE device (not RFC 9300's LISP)"},
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
	underlay   = "10.0.0.0/16"
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
