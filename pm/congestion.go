package pm

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/config"
)

// Congestion sets the congestion control of the namespace's connections
// while the path manager runs: the namespace's default
// (net.ipv4.tcp_congestion_control), which MPTCP sockets pass to all
// their subflows, and per subflow where a rule matches. amptcp's own
// controls (lia, olia, balia, wvegas or their amp_ names) are loaded if
// no other program has them registered; the kernel's (reno, cubic, ...)
// must be there. On exit the previous default comes back and what the
// path manager loaded is unregistered: running connections keep it until
// they close.
type Congestion struct {
	Algorithm string `yaml:"algorithm"`
	// Subflows are rules for single subflows, tried in order as each
	// subflow is established (a cgroup sockops program); the first that
	// matches sets its control. A subflow no rule matches keeps the
	// connection's.
	Subflows []SubflowRule `yaml:"subflows"`
	// Cgroup is where the sockops program attaches (cgroup v2); the root
	// of the cgroup v2 hierarchy by default, so that it sees every socket
	// of the namespace.
	Cgroup string `yaml:"cgroup"`
}

// SubflowRule matches subflows by their addresses and their handshake's
// RTT; every field given must match.
type SubflowRule struct {
	Local     string          `yaml:"local"`  // a prefix the local address is in
	Remote    string          `yaml:"remote"` // a prefix the peer's address is in
	RTTAbove  config.Duration `yaml:"rtt-above"`
	Algorithm string          `yaml:"algorithm"`
}

// MaxSubflowRules bounds the rules (the BPF program's table).
const MaxSubflowRules = cc.MaxRules

func (g *Congestion) defaults() {
	g.Algorithm = canonicalCC(g.Algorithm)
	for i := range g.Subflows {
		g.Subflows[i].Algorithm = canonicalCC(g.Subflows[i].Algorithm)
	}
}

// canonicalCC names amptcp's controls by their kernel names: lia is
// amp_lia; reno stays the kernel's Reno.
func canonicalCC(name string) string {
	for _, n := range cc.Coupled {
		if name == strings.TrimPrefix(n, "amp_") {
			return n
		}
	}
	return name
}

// ccName is what a congestion control's name looks like (TCP_CA_NAME_MAX).
var ccName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,14}$`)

func (g *Congestion) validate(ck *checker) {
	if g.Algorithm == "" {
		ck.add("congestion.algorithm", "missing: %s, or a control the kernel has (reno, cubic)", strings.Join(cc.Coupled, ", "))
	} else if !ccName.MatchString(g.Algorithm) {
		ck.add("congestion.algorithm", "%q is not a congestion control name", g.Algorithm)
	}
	if len(g.Subflows) > MaxSubflowRules {
		ck.add("congestion.subflows", "%d rules: at most %d", len(g.Subflows), MaxSubflowRules)
	}
	for i, r := range g.Subflows {
		path := fmt.Sprintf("congestion.subflows[%d]", i)
		if !ccName.MatchString(r.Algorithm) {
			ck.add(path+".algorithm", "%q is not a congestion control name", r.Algorithm)
		}
		for _, p := range []struct{ field, v string }{{"local", r.Local}, {"remote", r.Remote}} {
			if p.v == "" {
				continue
			}
			if pr, err := netip.ParsePrefix(p.v); err != nil || !pr.Addr().Is4() {
				ck.add(path+"."+p.field, "%q is not an IPv4 prefix like 10.0.2.0/24", p.v)
			}
		}
		if r.RTTAbove.Duration < 0 {
			ck.add(path+".rtt-above", "must not be negative")
		}
	}
}

// applyCongestion makes the configured controls registered (loading
// amptcp's if no other program has them), the namespace's default, and
// attaches the per-subflow rules. The function it returns undoes it all:
// the default goes back first, because a namespace's default keeps a
// control alive.
func (d *Daemon) applyCongestion(g *Congestion) (func(), error) {
	var releases []func() error
	unregister := func() {
		for _, r := range releases {
			if err := r(); err != nil {
				d.log.Warn("unregister a congestion control", "error", err)
			}
		}
	}
	names := []string{g.Algorithm}
	for _, r := range g.Subflows {
		names = append(names, r.Algorithm)
	}
	for _, n := range names {
		if !cc.Is(n) {
			continue
		}
		release, err := cc.Use(n)
		if err != nil {
			unregister()
			return nil, fmt.Errorf("pm: congestion.algorithm: %w", err)
		}
		releases = append(releases, release)
	}
	prev, err := readSysctl(defaultCCFile)
	if err == nil {
		err = writeSysctl(defaultCCFile, g.Algorithm)
	}
	if err != nil {
		unregister()
		return nil, fmt.Errorf("pm: make %s the namespace's congestion control: %w (net.ipv4.tcp_available_congestion_control lists what the kernel has)", g.Algorithm, err)
	}
	restore := func() {
		if err := writeSysctl(defaultCCFile, prev); err != nil {
			d.log.Warn("restore the namespace's congestion control", "algorithm", prev, "error", err)
		}
	}
	var pol *cc.SubflowPolicy
	if len(g.Subflows) > 0 {
		if pol, err = d.attachRules(g); err != nil {
			restore()
			unregister()
			return nil, err
		}
	}
	d.log.Info("congestion control", "algorithm", g.Algorithm, "previous", prev, "subflow_rules", len(g.Subflows))
	return func() {
		if pol != nil {
			pol.Close()
		}
		restore()
		unregister()
	}, nil
}

func (d *Daemon) attachRules(g *Congestion) (*cc.SubflowPolicy, error) {
	root := g.Cgroup
	if root == "" {
		var err error
		if root, err = cc.CgroupRoot(); err != nil {
			return nil, fmt.Errorf("pm: congestion.cgroup: %w", err)
		}
	}
	cookie, err := cc.NetnsCookie()
	if err != nil {
		return nil, fmt.Errorf("pm: congestion.subflows: %w", err)
	}
	var rules []cc.Rule
	for _, r := range g.Subflows {
		rule := cc.Rule{RTTAbove: r.RTTAbove.Duration, Algorithm: r.Algorithm}
		rule.Local, _ = netip.ParsePrefix(r.Local) // validated
		rule.Remote, _ = netip.ParsePrefix(r.Remote)
		rules = append(rules, rule)
	}
	pol, err := cc.AttachSubflowRules(root, cookie, rules)
	if err != nil {
		return nil, fmt.Errorf("pm: congestion.subflows: %w", err)
	}
	return pol, nil
}

// defaultCCFile is the namespace's default congestion control; /proc/sys
// resolves against the calling thread's network namespace.
const defaultCCFile = "/proc/sys/net/ipv4/tcp_congestion_control"

func readSysctl(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}
