package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a data plane loaded in a namespace of its own, with an EID
// interface and an RLOC interface whose next hop has a known MAC, so that
// the programs' route lookups succeed under BPF_PROG_TEST_RUN:
//
//	eid0 10.1.0.254/24, fd01::fe/64            (the site)
//	rloc0 192.0.2.1/24, 2001:db8:1::1/64        (the underlay)
//	    198.51.100.0/24, 203.0.113.0/24 via 192.0.2.2 (02:00:00:00:00:02)
//	    2001:db8:9::/48 via 2001:db8:1::2
type rig struct {
	t         testing.TB
	ns        *netns.NS
	dp        *Dataplane
	eid, rloc int // ifindexes
	rlocMAC   net.HardwareAddr
}

var nextHopMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}

func newRig(t testing.TB, cfg config.Dataplane, opts Options) *rig {
	t.Helper()
	testenv.RequireRoot(t)
	r := &rig{t: t, ns: testenv.NetNS(t)}
	err := r.ns.Do(func() error {
		if cfg.RLOCInterfaces == nil {
			cfg.RLOCInterfaces = []string{"rloc0"}
		}
		if err := r.build(cfg.RLOCInterfaces); err != nil {
			return err
		}
		if cfg.EIDInterfaces == nil {
			cfg.EIDInterfaces = []string{"eid0"}
		}
		withDefaults(&cfg)
		dp, err := New(&cfg, opts)
		r.dp = dp
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dp.Close() })
	return r
}

// withDefaults completes cfg as config.Parse would.
func withDefaults(cfg *config.Dataplane) {
	c := config.Config{Roles: []config.Role{config.RoleRTR}, Dataplane: cfg}
	c.Defaults()
}

// build makes the rig's interfaces, and a veth for each other RLOC
// interface named, the nth with 100.64.n.1/24 and 2001:db8:64:n::1/64.
func (r *rig) build(rlocIfaces []string) error {
	sysctls := map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                     "1",
		"/proc/sys/net/ipv6/conf/all/forwarding":            "1",
		"/proc/sys/net/ipv6/conf/default/accept_dad":        "0",
		"/proc/sys/net/ipv6/conf/default/forwarding":        "1",
		"/proc/sys/net/ipv4/conf/default/rp_filter":         "0",
		"/proc/sys/net/ipv4/conf/all/rp_filter":             "0",
		"/proc/sys/net/ipv6/conf/all/accept_dad":            "0",
		"/proc/sys/net/ipv6/conf/default/disable_ipv6":      "0",
		"/proc/sys/net/ipv6/conf/all/disable_ipv6":          "0",
		"/proc/sys/net/ipv4/conf/default/forwarding":        "1",
		"/proc/sys/net/ipv4/conf/all/forwarding":            "1",
		"/proc/sys/net/ipv6/conf/default/keep_addr_on_down": "1",
	}
	for path, v := range sysctls {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return err
		}
	}
	links := []string{"eid0", "rloc0"}
	addrs := map[string][]string{
		"eid0":  {"10.1.0.254/24", "fd01::fe/64"},
		"rloc0": {"192.0.2.1/24", "2001:db8:1::1/64"},
	}
	for n, name := range slices.DeleteFunc(slices.Clone(rlocIfaces), func(s string) bool { return s == "rloc0" }) {
		links = append(links, name)
		addrs[name] = []string{fmt.Sprintf("100.64.%d.1/24", n), fmt.Sprintf("2001:db8:64:%d::1/64", n)}
	}
	for _, name := range links {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add %s: %w", name, err)
		}
	}
	for _, name := range links {
		for _, name := range []string{name, name + "p"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			for _, a := range addrs[name] {
				ad, _ := netlink.ParseAddr(a)
				ad.Flags = 0x80 // IFA_F_NODAD
				if err := netlink.AddrAdd(l, ad); err != nil {
					return fmt.Errorf("address %s on %s: %w", a, name, err)
				}
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			switch name {
			case "eid0":
				r.eid = l.Attrs().Index
			case "rloc0":
				r.rloc = l.Attrs().Index
				r.rlocMAC = l.Attrs().HardwareAddr
			}
		}
	}
	for _, nh := range []string{"192.0.2.2", "2001:db8:1::2"} {
		n := &netlink.Neigh{LinkIndex: r.rloc, IP: net.ParseIP(nh), HardwareAddr: nextHopMAC, State: netlink.NUD_PERMANENT}
		if err := netlink.NeighAdd(n); err != nil {
			return fmt.Errorf("neighbour %s: %w", nh, err)
		}
	}
	for dst, gw := range map[string]string{
		"198.51.100.0/24": "192.0.2.2", "203.0.113.0/24": "192.0.2.2", "2001:db8:9::/48": "2001:db8:1::2",
	} {
		_, n, _ := net.ParseCIDR(dst)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: r.rloc, Dst: n, Gw: net.ParseIP(gw)}); err != nil {
			return fmt.Errorf("route %s: %w", dst, err)
		}
	}
	return nil
}

// Verdicts of tc programs.
const (
	actOK       = 0
	actShot     = 2
	actRedirect = 7
)

// run passes frame to prog as if it came in on the interface ifindex and
// returns the verdict and the frame as the program left it.
func (r *rig) run(prog *ebpf.Program, ifindex int, frame []byte) (uint32, []byte) {
	r.t.Helper()
	ctx := make([]byte, 48) // struct __sk_buff up to ifindex
	binary.NativeEndian.PutUint32(ctx[40:], uint32(ifindex))
	out := make([]byte, len(frame)+256)
	var ret uint32
	err := r.ns.Do(func() error {
		opts := &ebpf.RunOptions{Data: frame, DataOut: out, Context: ctx}
		var err error
		ret, err = prog.Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	return ret, out
}

// itr runs the ITR on a packet from a host of the site.
func (r *rig) itr(pkt []byte) (uint32, []byte) {
	r.t.Helper()
	src := netip.AddrFrom4([4]byte{10, 1, 0, 1})
	if pkt[0]>>4 == 6 {
		src = netip.MustParseAddr("fd01::1")
	}
	return r.run(r.dp.objs.Itr, r.eid, eth(r.ethOf(r.eid), hostMAC, ethType(src), pkt))
}

// underlay runs the ETR/RTR on an encapsulated packet from the next hop.
func (r *rig) underlay(outer []byte) (uint32, []byte) {
	r.t.Helper()
	typ := uint16(ethIPv4)
	if outer[0]>>4 == 6 {
		typ = ethIPv6
	}
	return r.run(r.dp.objs.Underlay, r.rloc, eth(r.rlocMAC, nextHopMAC, typ, outer))
}

var hostMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}

func (r *rig) ethOf(ifindex int) net.HardwareAddr {
	var mac net.HardwareAddr
	r.ns.Do(func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err == nil {
			mac = l.Attrs().HardwareAddr
		}
		return err
	})
	return mac
}

func (r *rig) put(prefix string, e Entry) {
	r.t.Helper()
	if err := r.dp.Put(Key{Prefix: netip.MustParsePrefix(prefix)}, e); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) counters() Counters {
	r.t.Helper()
	c, err := r.dp.Counters()
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// rloc is a plain locator path.
func rloc(a string, prio, weight uint8) Path {
	return Path{Hops: []Hop{{Addr: netip.MustParseAddr(a)}}, Priority: prio, Weight: weight, Up: true}
}

// elp is an ELP path through the hops.
func elp(prio, weight uint8, hops ...string) Path {
	p := Path{Priority: prio, Weight: weight, Up: true}
	for _, h := range hops {
		p.Hops = append(p.Hops, Hop{Addr: netip.MustParseAddr(h)})
	}
	return p
}

// forEachHeaderRead runs test with the programs reading headers straight
// from the linear area, and again with bpf_skb_load_bytes, as they do
// when the headers are in paged data.
func forEachHeaderRead(t *testing.T, opts Options, test func(t *testing.T, opts Options)) {
	for _, loadBytes := range []bool{false, true} {
		name := "direct"
		if loadBytes {
			name = "load_bytes"
		}
		o := opts
		o.loadBytesOnly = loadBytes
		t.Run(name, func(t *testing.T) { test(t, o) })
	}
}
