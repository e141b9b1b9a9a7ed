package cc

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// MaxRules is how many rules the per-subflow program holds.
const MaxRules = 8

// Rule sets the congestion control of the MPTCP subflows it matches as
// they are established: by local and remote address (a zero prefix
// matches any) and by an RTT of the handshake above RTTAbove (0: any).
type Rule struct {
	Local, Remote netip.Prefix
	RTTAbove      time.Duration
	Algorithm     string
}

// SubflowPolicy is the cgroup sockops program that applies rules.
type SubflowPolicy struct {
	coll  *ebpf.Collection
	link  link.Link
	rules *ebpf.Map
}

// AttachSubflowRules attaches to a cgroup (v2) a sockops program that
// sets, by the first matching rule, the congestion control of each MPTCP
// subflow of the network namespace netnsCookie (NetnsCookie) that is
// established from now on. The controls the rules name must be
// registered. Close detaches it.
func AttachSubflowRules(cgroup string, netnsCookie uint64, rules []Rule) (*SubflowPolicy, error) {
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("cc: %d subflow rules, at most %d", len(rules), MaxRules)
	}
	full, err := loadCc()
	if err != nil {
		return nil, fmt.Errorf("cc: read the BPF object: %w", err)
	}
	s := full.Copy()
	for k := range s.Programs {
		if k != "amp_subflow_cc" {
			delete(s.Programs, k)
		}
	}
	for k, m := range s.Maps {
		if k != "amp_rules" && !strings.HasPrefix(m.Name, ".") {
			delete(s.Maps, k)
		}
	}
	if err := s.Variables["amp_netns_cookie"].Set(netnsCookie); err != nil {
		return nil, fmt.Errorf("cc: %w", err)
	}
	coll, err := ebpf.NewCollection(s)
	if err != nil {
		return nil, fmt.Errorf("cc: load the subflow program: %w", verifierDetail(err))
	}
	p := &SubflowPolicy{coll: coll, rules: coll.Maps["amp_rules"]}
	for i, r := range rules {
		v := ccAmpRule{Used: 1, RttAboveUs: uint32(r.RTTAbove / time.Microsecond)}
		v.Local, v.LocalMask = prefixWords(r.Local)
		v.Remote, v.RemoteMask = prefixWords(r.Remote)
		if len(r.Algorithm) >= len(v.Cc) {
			coll.Close()
			return nil, fmt.Errorf("cc: rule %d: %q is not a congestion control name", i, r.Algorithm)
		}
		for j := range len(r.Algorithm) {
			v.Cc[j] = int8(r.Algorithm[j])
		}
		if err := p.rules.Put(uint32(i), &v); err != nil {
			coll.Close()
			return nil, fmt.Errorf("cc: rule %d: %w", i, err)
		}
	}
	p.link, err = link.AttachCgroup(link.CgroupOptions{Path: cgroup, Attach: ebpf.AttachCGroupSockOps, Program: coll.Programs["amp_subflow_cc"]})
	if err != nil {
		coll.Close()
		return nil, fmt.Errorf("cc: attach the subflow program to %s: %w", cgroup, err)
	}
	return p, nil
}

// prefixWords is a prefix as the program compares it: address and mask
// in network byte order, read as a native u32 (as bpf_sock_ops has them).
func prefixWords(p netip.Prefix) (addr, mask uint32) {
	if !p.IsValid() {
		return 0, 0
	}
	a := p.Masked().Addr().As4()
	var m [4]byte
	for i := range p.Bits() {
		m[i/8] |= 0x80 >> (i % 8)
	}
	native := func(b [4]byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	return native(a), native(m)
}

// Matched returns how many subflows each rule has set.
func (p *SubflowPolicy) Matched() ([]uint64, error) {
	var out []uint64
	for i := range MaxRules {
		var v ccAmpRule
		if err := p.rules.Lookup(uint32(i), &v); err != nil {
			return nil, fmt.Errorf("cc: read rule %d: %w", i, err)
		}
		if v.Used == 0 {
			break
		}
		out = append(out, v.Matched)
	}
	return out, nil
}

// Close detaches the program.
func (p *SubflowPolicy) Close() error {
	err := p.link.Close()
	p.coll.Close()
	return err
}

// NetnsCookie returns the cookie of the calling thread's network
// namespace (SO_NETNS_COOKIE, Linux 5.14).
func NetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("cc: %w", err)
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("cc: read the network namespace's cookie: %w", err)
	}
	return cookie, nil
}

// CgroupRoot returns where the cgroup v2 hierarchy is mounted: its root
// holds every socket of the host (the program filters by namespace).
// /sys/fs/cgroup on a unified layout, /sys/fs/cgroup/unified on a hybrid.
func CgroupRoot() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("cc: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// ID parent major:minor root mountpoint options ... - fstype source super
		pre, post, ok := strings.Cut(line, " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || !strings.HasPrefix(post, "cgroup2 ") || fields[3] != "/" {
			continue
		}
		return fields[4], nil
	}
	return "", errors.New("cc: no cgroup v2 hierarchy is mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)")
}
