package pm

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/mapping"
)

func rlocs(n, elps int) *Mapping { return &Mapping{RLOCs: n, ELPs: elps} }

var negative = &Mapping{Negative: true}

// The plans of every policy: the number of subflows and its caps.
func TestPlans(t *testing.T) {
	oneAddr := []netip.Addr{addr("10.1.0.1")}
	twoAddrs := []netip.Addr{addr("10.1.0.1"), addr("10.1.1.1"), addr("2001:db8::1")} // IPv6 is another family
	announced := []netip.AddrPort{ap("10.2.1.1:5201")}
	for _, tc := range []struct {
		name        string
		in          planInput
		n, want, p  int
		out, back   int
		capped, why string
	}{
		{name: "default", in: planInput{policy: PolicyDefault}, n: 1, want: 1, p: 1},
		{name: "ndiffports 4", in: planInput{policy: PolicyNdiffports, subflows: 4}, n: 4, want: 4, p: 1},
		{name: "subflows 3", in: planInput{policy: PolicySubflows, subflows: 3}, n: 3, want: 3, p: 3},
		{name: "fullmesh 2x2", in: planInput{policy: PolicyFullmesh, localAddrs: twoAddrs, remoteAddrs: announced}, n: 4, want: 4, p: 1},
		{name: "fullmesh 1x1", in: planInput{policy: PolicyFullmesh, localAddrs: oneAddr}, n: 1, want: 1, p: 1},
		{name: "eq1 1 RLOC each", in: planInput{policy: PolicyAMPTCP, equation: 1, localAddrs: oneAddr, localMap: rlocs(1, 0), remoteMap: rlocs(1, 0)},
			n: 1, want: 1, p: 1, out: 1, back: 1, why: "equation (1): max(l 1×1, L 1×1) = 1"},
		{name: "eq1 peer 2 RLOCs", in: planInput{policy: PolicyAMPTCP, equation: 1, localAddrs: oneAddr, localMap: rlocs(1, 0), remoteMap: rlocs(2, 0)},
			n: 2, want: 2, p: 2, out: 2, back: 1},
		{name: "eq2 2x3", in: planInput{policy: PolicyAMPTCP, equation: 2, localMap: rlocs(2, 0), remoteMap: rlocs(3, 0)},
			n: 6, want: 6, p: 6, out: 3, back: 2, why: "equation (2): L 2×3 = 6"},
		{name: "eq2 2x2 (lcm 2)", in: planInput{policy: PolicyAMPTCP, equation: 2, localMap: rlocs(2, 0), remoteMap: rlocs(2, 0)},
			n: 2, want: 4, p: 2, out: 2, back: 2, capped: "distinct paths"},
		{name: "eq2 2x4 (lcm 4)", in: planInput{policy: PolicyAMPTCP, equation: 2, localMap: rlocs(2, 0), remoteMap: rlocs(0, 4)},
			n: 4, want: 8, p: 4, out: 4, back: 2, capped: "distinct paths"},
		{name: "eq1 2x2 addresses and paths", in: planInput{policy: PolicyAMPTCP, equation: 1, localAddrs: twoAddrs, remoteAddrs: announced,
			localMap: rlocs(2, 0), remoteMap: rlocs(2, 0)}, n: 4, want: 4, p: 2, out: 2, back: 2},
		{name: "eq2 ELPs count", in: planInput{policy: PolicyAMPTCP, equation: 2, localMap: rlocs(1, 0), remoteMap: rlocs(1, 2)},
			n: 3, want: 3, p: 3, out: 3, back: 1},
		{name: "eq1 interfaces win", in: planInput{policy: PolicyAMPTCP, equation: 1, localAddrs: twoAddrs, remoteAddrs: announced,
			localMap: rlocs(1, 0), remoteMap: rlocs(1, 0)}, n: 4, want: 4, p: 1, out: 1, back: 1},
		{name: "eq2 ignores interfaces", in: planInput{policy: PolicyAMPTCP, equation: 2, localAddrs: twoAddrs, remoteAddrs: announced,
			localMap: rlocs(1, 0), remoteMap: rlocs(1, 0)}, n: 1, want: 1, p: 1, out: 1, back: 1},
		{name: "negative peer", in: planInput{policy: PolicyAMPTCP, equation: 2, localMap: rlocs(2, 0), remoteMap: negative},
			n: 1, want: 1, p: 1, why: "equation (2): L 2×0 = 0, at least the first subflow"},
		{name: "max-subflows", in: planInput{policy: PolicyAMPTCP, equation: 2, maxSubflows: 4, localMap: rlocs(2, 0), remoteMap: rlocs(3, 0)},
			n: 4, want: 6, p: 6, out: 3, back: 2, capped: "max-subflows"},
		{name: "binder 3 gateways", in: planInput{policy: PolicyBinder, localAddrs: twoAddrs, localMap: rlocs(3, 0)},
			n: 3, want: 3, p: 3, back: 3, why: "binder: a subflow per gateway of the site, 3"},
		{name: "binder 2 over 2 ELPs", in: planInput{policy: PolicyBinder, subflows: 4, localMap: rlocs(0, 2)},
			n: 4, want: 4, p: 2, back: 2, why: "binder: 4 subflows over the site's 2 gateways"},
		{name: "binder without a mapping", in: planInput{policy: PolicyBinder, subflows: 2},
			n: 2, want: 2, p: 1, why: "binder: no gateway known (no mapping of the local site): 2 subflows on the first path"},
		{name: "kernel limit", in: planInput{policy: PolicyNdiffports, subflows: 8, maxSubflows: 8, kernelCap: 3},
			n: 3, want: 8, p: 1, capped: "kernel limit"},
		{name: "both caps", in: planInput{policy: PolicySubflows, subflows: 9, maxSubflows: 8, kernelCap: 3},
			n: 3, want: 9, p: 9, capped: "max-subflows, kernel limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.local, tc.in.remote = clientAddr, serverAddr
			p := computePlan(tc.in)
			if p.N != tc.n || p.Want != tc.want || p.P != tc.p || p.PathsOut != tc.out || p.PathsBack != tc.back || p.Capped != tc.capped {
				t.Errorf("plan N %d want %d P %d out %d back %d capped %q; want %d %d %d %d %d %q\n%s",
					p.N, p.Want, p.P, p.PathsOut, p.PathsBack, p.Capped, tc.n, tc.want, tc.p, tc.out, tc.back, tc.capped, p.Why)
			}
			if tc.why != "" && p.Why != tc.why {
				t.Errorf("why %q, want %q", p.Why, tc.why)
			}
			if len(p.Slots) != p.N {
				t.Fatalf("%d slots for %d subflows", len(p.Slots), p.N)
			}
			first := p.Slots[0]
			if first.Local != clientAddr.Addr() || first.Remote != serverAddr || first.Residue != sum(clientAddr, serverAddr)%p.P {
				t.Errorf("slot 0 %+v is not the first subflow", first)
			}
		})
	}
}

// Slots spread over the residues and the address pairs: distinct residues
// while there are at most P subflows, then each residue as often as the
// others; fullmesh pairs are each used once.
func TestPlanSlotsSpread(t *testing.T) {
	p := computePlan(planInput{policy: PolicyAMPTCP, equation: 1, local: clientAddr, remote: serverAddr,
		localAddrs: []netip.Addr{addr("10.1.1.1")}, remoteAddrs: []netip.AddrPort{ap("10.2.1.1:5201")},
		localMap: rlocs(2, 0), remoteMap: rlocs(2, 0)})
	counts := map[int]int{}
	for _, s := range p.Slots {
		counts[s.Residue]++
	}
	if len(counts) != 2 || counts[0] != 2 || counts[1] != 2 {
		t.Errorf("4 subflows over P=2: residues %v", counts)
	}
	p = computePlan(planInput{policy: PolicyFullmesh, local: clientAddr, remote: serverAddr,
		localAddrs: []netip.Addr{addr("10.1.1.1")}, remoteAddrs: []netip.AddrPort{ap("10.2.1.1:5201"), serverAddr}})
	var pairs []string
	for _, s := range p.Slots {
		pairs = append(pairs, fmt.Sprintf("%s>%s", s.Local, s.Remote))
	}
	want := "[10.1.0.1>10.2.0.1:5201 10.1.1.1>10.2.1.1:5201 10.1.0.1>10.2.1.1:5201 10.1.1.1>10.2.0.1:5201]"
	if fmt.Sprint(pairs) != want {
		t.Errorf("fullmesh pairs %v, want %s", pairs, want)
	}
}

// Two hosts with 8 addresses each, fullmesh capped at 8 subflows: the 8
// pairs of the same index, one per link, each address once.
func TestFullmeshCappedUsesEveryAddress(t *testing.T) {
	var local []netip.Addr
	var remote []netip.AddrPort
	for i := range 8 {
		local = append(local, netip.AddrFrom4([4]byte{10, 0, byte(i), 1}))
		remote = append(remote, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 2}), 5001))
	}
	p := computePlan(planInput{policy: PolicyFullmesh, maxSubflows: 8, local: netip.AddrPortFrom(local[0], 40000), remote: remote[0],
		localAddrs: local, remoteAddrs: remote[1:]})
	if p.N != 8 || p.Want != 64 {
		t.Fatalf("plan N %d of %d, want 8 of 64", p.N, p.Want)
	}
	for i, s := range p.Slots {
		if s.Local != local[i] || s.Remote != remote[i] {
			t.Errorf("slot %d: %s > %s, want %s > %s", i, s.Local, s.Remote, local[i], remote[i])
		}
	}
}

func TestLCM(t *testing.T) {
	for _, tc := range [][3]int{{1, 1, 1}, {2, 3, 6}, {2, 2, 2}, {4, 6, 12}, {0, 3, 3}, {0, 0, 1}} {
		if got := lcm(tc[0], tc[1]); got != tc[2] {
			t.Errorf("lcm(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}

// amptcp pairs only the local addresses of the local site: an address
// outside its EID-prefix would not take the site's paths. It still counts
// as an interface in equation (1).
func TestAMPTCPPairsAddressesOfTheSite(t *testing.T) {
	site := &Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/16")), RLOCs: 1}
	p := computePlan(planInput{policy: PolicyAMPTCP, equation: 1, local: clientAddr, remote: serverAddr,
		localAddrs: []netip.Addr{addr("192.168.7.5"), addr("10.1.1.1")}, localMap: site, remoteMap: rlocs(2, 0)})
	if p.N != 3 || p.LocalAddrs != 3 {
		t.Fatalf("plan N %d l_local %d, want max(3×1, 1×2) = 3 with 3 addresses", p.N, p.LocalAddrs)
	}
	for _, s := range p.Slots {
		if s.Local == addr("192.168.7.5") {
			t.Errorf("slot %+v uses an address outside the site", s)
		}
	}
}
