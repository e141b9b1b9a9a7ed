package pm

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Plan is what a policy decided for one connection: how many subflows,
// why, and each one's address pair and path.
type Plan struct {
	// Policy is the policy applied: the configured one, or default when
	// Fallback says why not.
	Policy   Policy `json:"policy"`
	Fallback string `json:"fallback,omitempty"`
	// N is the number of subflows, the first one included; Want is what
	// the policy asked for before the caps, and Capped names what capped
	// it ("" when nothing did).
	N      int    `json:"n"`
	Want   int    `json:"want"`
	Capped string `json:"capped,omitempty"`
	// Why is the computation in words, like "equation (1): max(l 1×1,
	// L 2×1) = 2".
	Why string `json:"why"`
	// The inputs of the amptcp equations: the host's usable addresses
	// (l_local), the peer's addresses (l_remote: its first and those it
	// announced), and the paths of the local and the peer's mappings
	// (L_local, L_remote), each RLOCs plus ELPs.
	Equation    int      `json:"equation,omitempty"`
	LocalAddrs  int      `json:"local_addrs"`
	RemoteAddrs int      `json:"remote_addrs"`
	Local       *Mapping `json:"local_mapping,omitempty"`
	Remote      *Mapping `json:"remote_mapping,omitempty"`
	// P is the modulus of the port sum: the subflows' (source port +
	// destination port) mod P differ as long as there are at most P of
	// them (then they spread evenly). 1 means any port will do.
	P int `json:"p"`
	// PathsOut and PathsBack are the paths each xTR picks from with the
	// port sum: the local ITR among the peer's mapping, the peer's ITR
	// among ours. 0 when the policy does not steer.
	PathsOut  int `json:"paths_out,omitempty"`
	PathsBack int `json:"paths_back,omitempty"`
	// Slots are the subflows, the first (existing) one at index 0.
	Slots []SlotSpec `json:"slots"`
	// distinct is how many subflows can take paths of their own (0: no
	// bound): more would share a path with another, which [A-MPTCP]
	// measured to be slower on average than one subflow per path.
	distinct int
}

// SlotSpec is one planned subflow: its addresses and the residue its
// port sum must have modulo the plan's P.
type SlotSpec struct {
	Local   netip.Addr     `json:"local"`
	Remote  netip.AddrPort `json:"remote"`
	Residue int            `json:"residue"`
}

// planInput is what a plan is computed from.
type planInput struct {
	policy      Policy
	subflows    int // of the subflows and ndiffports policies
	equation    int
	maxSubflows int
	kernelCap   int // 0: no kernel limit known
	// first is the connection's first subflow: local and remote.
	local, remote netip.AddrPort
	// localAddrs are the host's usable addresses of the connection's
	// family, remoteAddrs the peer's (its first address and those it
	// announced, with ports).
	localAddrs  []netip.Addr
	remoteAddrs []netip.AddrPort
	// The mappings of the local and the peer's EIDs, for amptcp.
	localMap, remoteMap *Mapping
}

// fallback is the plan of a connection that gets the default policy
// because the configured one could not be applied.
func fallback(in planInput, why string) Plan {
	in.policy = PolicyDefault
	p := computePlan(in)
	p.Fallback = why
	return p
}

// computePlan applies the input's policy. The plan is pure: the same
// input always gives the same slots.
func computePlan(in planInput) Plan {
	local, remote := pairsFirst(in)
	p := Plan{Policy: in.policy, LocalAddrs: len(local), RemoteAddrs: len(remote), P: 1}
	pairs := [][2]int{{0, 0}}
	switch in.policy {
	case PolicyDefault:
		p.Want, p.Why = 1, "the default policy opens no subflow"
	case PolicyNdiffports:
		p.Want, p.Why = in.subflows, fmt.Sprintf("ndiffports: %d subflows on one address pair", in.subflows)
	case PolicySubflows:
		p.Want, p.P = in.subflows, max(in.subflows, 1)
		p.Why = fmt.Sprintf("subflows: %d, ports spread over %d paths", in.subflows, p.P)
	case PolicyFullmesh:
		pairs = allPairs(len(local), len(remote))
		p.Want = len(pairs)
		p.Why = fmt.Sprintf("fullmesh: %d local × %d peer addresses", len(local), len(remote))
	case PolicyAMPTCP:
		local = inSite(local, in.localMap)
		pairs = allPairs(len(local), len(remote))
		p.amptcp(in)
	case PolicyBinder:
		p.binder(in)
	}
	p.cap(in)
	r0 := int(portSum(in.local.Port(), in.remote.Port()) % uint32(p.P))
	p.Slots = make([]SlotSpec, p.N)
	for i := range p.Slots {
		pair := pairs[i%len(pairs)]
		p.Slots[i] = SlotSpec{Local: local[pair[0]], Remote: remote[pair[1]], Residue: (r0 + i) % p.P}
	}
	return p
}

// amptcp computes N with equation (1) or (2) of [A-MPTCP] §III.A:
//
//	(1) N = max(l_local·l_remote, L_local·L_remote)
//	(2) N = L_local·L_remote
//
// where l counts addresses (the host's interfaces, the peer's first
// address and those it announced) and L the usable paths of each side's
// mapping (RLOCs and ELPs of the best priority). A side whose mapping is
// negative (no LISP site) has no LISP paths: its L is 0.
func (p *Plan) amptcp(in planInput) {
	p.Equation = in.equation
	p.Local, p.Remote = in.localMap, in.remoteMap
	l1, l2 := p.LocalAddrs, p.RemoteAddrs
	L1, L2 := in.localMap.Paths(), in.remoteMap.Paths()
	lisp := L1 * L2
	if in.equation == 2 {
		p.Want = lisp
		p.Why = fmt.Sprintf("equation (2): L %d×%d = %d", L1, L2, lisp)
	} else {
		p.Want = max(l1*l2, lisp)
		p.Why = fmt.Sprintf("equation (1): max(l %d×%d, L %d×%d) = %d", l1, l2, L1, L2, p.Want)
	}
	if p.Want < 1 {
		p.Want = 1
		p.Why += ", at least the first subflow"
	}
	if lisp > 0 {
		// Each xTR takes (sport+dport) mod its own number of paths: sums
		// distinct modulo the lcm give distinct pairs of paths.
		p.PathsOut, p.PathsBack = L2, L1
		p.P = lcm(L1, L2)
		// Both xTRs see the same port sum, so only P = lcm(L1, L2)
		// pairs of paths can be told apart (L1·L2 when coprime); with
		// equation (1), address pairs are paths of their own too.
		p.distinct = p.P
		if in.equation != 2 {
			p.distinct = max(p.P, l1*l2)
		}
	}
}

// cap bounds Want by the paths the subflows can take apart, the
// configured maximum and the kernel's limit.
func (p *Plan) cap(in planInput) {
	p.N = max(p.Want, 1)
	var why []string
	if p.distinct > 0 && p.N > p.distinct {
		p.N = p.distinct
		why = append(why, "distinct paths")
	}
	if in.maxSubflows > 0 && p.N > in.maxSubflows {
		p.N = in.maxSubflows
		why = append(why, "max-subflows")
	}
	if in.kernelCap > 0 && p.N > in.kernelCap {
		p.N = in.kernelCap
		why = append(why, "kernel limit")
	}
	if len(why) > 0 {
		p.Capped = strings.Join(why, ", ")
		p.Why += fmt.Sprintf("; capped at %d by %s", p.N, p.Capped)
	}
}

// pairsFirst returns the local and remote addresses a plan pairs, the
// first subflow's first in each, without duplicates.
func pairsFirst(in planInput) ([]netip.Addr, []netip.AddrPort) {
	local := []netip.Addr{in.local.Addr()}
	for _, a := range in.localAddrs {
		if a.Is4() == in.local.Addr().Is4() && !slices.Contains(local, a) {
			local = append(local, a)
		}
	}
	remote := []netip.AddrPort{in.remote}
	for _, a := range in.remoteAddrs {
		if a.Addr().Is4() == in.remote.Addr().Is4() && !slices.Contains(remote, a) {
			remote = append(remote, a)
		}
	}
	return local, remote
}

// inSite keeps the addresses in the local mapping's EID-prefix, the
// first subflow's always: an address outside the site (a management
// interface, another network) would not take the site's paths.
func inSite(addrs []netip.Addr, m *Mapping) []netip.Addr {
	if m == nil || m.Negative || !m.EID.Prefix.IsValid() {
		return addrs[:1]
	}
	kept := addrs[:1:1]
	for _, a := range addrs[1:] {
		if m.EID.Prefix.Contains(a) {
			kept = append(kept, a)
		}
	}
	return kept
}

// allPairs lists the (local, remote) index pairs: the first subflow's
// (0, 0) first, then the other pairs by diagonals, (1, 1), (2, 2), ...,
// then (0, 1), (1, 2), ..., so that a plan capped below the number of
// pairs (max-subflows, the kernel's limit) still uses each local and
// each peer address as evenly as it can: two hosts with 8 addresses each
// get the 8 pairs of the same index, one per link, not 8 subflows from
// the first address ([MPTCP-failures]' 8 parallel links).
func allPairs(nLocal, nRemote int) [][2]int {
	pairs := make([][2]int, 0, nLocal*nRemote)
	for d := range nRemote {
		for i := range nLocal {
			pairs = append(pairs, [2]int{i, (i + d) % nRemote})
		}
	}
	return pairs
}

// portSum is what a port-sum xTR takes the path index from.
func portSum(sport, dport uint16) uint32 { return uint32(sport) + uint32(dport) }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int {
	if a <= 0 || b <= 0 {
		return max(a, b, 1)
	}
	return a / gcd(a, b) * b
}
