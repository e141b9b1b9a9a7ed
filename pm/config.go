package pm

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/amptcp/amptcp/config"
)

// Policy is how many subflows a connection gets, and where.
type Policy string

// The policies. See docs/pm.md.
const (
	// PolicyAMPTCP asks the mapping system how many paths the two sites
	// offer and opens one subflow per path ([A-MPTCP] §III).
	PolicyAMPTCP Policy = "amptcp"
	// PolicySubflows opens a fixed number of subflows steered like
	// amptcp's, the "overridden" mode of [A-MPTCP].
	PolicySubflows Policy = "subflows"
	// PolicyFullmesh opens one subflow per pair of a local address and a
	// peer address.
	PolicyFullmesh Policy = "fullmesh"
	// PolicyNdiffports opens a fixed number of subflows on the address
	// pair of the first, with other ports.
	PolicyNdiffports Policy = "ndiffports"
	// PolicyBinder opens a subflow per gateway of the local site (its
	// RLOCs and ELPs, from the mapping system) on the first subflow's
	// address pair, each steered to its own gateway: [NorNet]'s binder,
	// with the overlay in place of loose source routes.
	PolicyBinder Policy = "binder"
	// PolicyDefault opens nothing: the connection keeps its one subflow.
	PolicyDefault Policy = "default"
)

// Policies are all the policies, in the order they are documented.
var Policies = []Policy{PolicyAMPTCP, PolicySubflows, PolicyFullmesh, PolicyNdiffports, PolicyBinder, PolicyDefault}

// Config is the configuration of `amptcp pm`.
type Config struct {
	Policy Policy `yaml:"policy"`
	// Subflows is the number of subflows of the subflows and ndiffports
	// policies, the first one included; the binder policy's, when given,
	// in place of one per gateway.
	Subflows int `yaml:"subflows"`
	// MaxSubflows caps every plan, the first subflow included.
	MaxSubflows int `yaml:"max-subflows"`
	// KernelLimit also caps plans by the kernel's subflow limit (`ip
	// mptcp limits`) plus the first subflow. On by default.
	KernelLimit *bool   `yaml:"kernel-limit"`
	AMPTCP      *AMPTCP `yaml:"amptcp"`
	// LongLived chooses the connections that get more subflows; left out,
	// every connection does.
	LongLived LongLived `yaml:"long-lived"`
	Repair    Repair    `yaml:"repair"`
	// Backup gives backup priority (MP_PRIO) to the subflows that would
	// only add head-of-line blocking, and takes it back when a regular
	// subflow fails.
	Backup Backup `yaml:"backup"`
	// Congestion is the congestion control of the namespace's
	// connections, and per subflow where a rule says so.
	Congestion *Congestion `yaml:"congestion"`
	// PollInterval is how often the daemon reads the kernel's MPTCP
	// sockets (sock_diag) while a connection waits for min-bytes or has
	// subflows to watch for stalls.
	PollInterval config.Duration `yaml:"poll-interval"`
	// Announce are addresses a server announces (ADD_ADDR) to the
	// clients of its connections, with IDs from 1 in this order.
	Announce []string       `yaml:"announce"`
	Control  config.Control `yaml:"control"`
	Metrics  config.Metrics `yaml:"metrics"`
	Log      config.Log     `yaml:"log"`
}

// AMPTCP configures the amptcp policy: where to ask for mappings, and
// how to turn them into a number of subflows.
type AMPTCP struct {
	// MapResolver receives the Encapsulated Map-Requests for the peer's
	// EID ("10.0.100.2" or "10.0.100.2:4342").
	MapResolver string `yaml:"map-resolver"`
	// XTR, if set, is asked for the local EID's mapping instead: the
	// site's own xTR answers for its database without a round trip to
	// the mapping system.
	XTR string `yaml:"xtr"`
	// Source is the address the Map-Replies come back to; left out, the
	// route's source toward the map-resolver.
	Source string `yaml:"source"`
	// InstanceID, if set, puts the EIDs in this instance.
	InstanceID *uint32 `yaml:"instance-id"`
	// Equation is 1 (max(l1·l2, L1·L2): hosts reach their xTRs in no
	// particular way) or 2 (L1·L2: each interface reaches one RLOC), as
	// [A-MPTCP] §III.A numbers them.
	Equation int `yaml:"equation"`
	// Timeout is how long each Map-Request waits for its reply, Tries how
	// many are sent before the connection falls back to the default
	// policy.
	Timeout config.Duration `yaml:"timeout"`
	Tries   int             `yaml:"tries"`
	// Cache keeps each Map-Reply for its TTL, at most MaxCacheTTL. On by
	// default.
	Cache       *bool           `yaml:"cache"`
	MaxCacheTTL config.Duration `yaml:"max-cache-ttl"`
}

// LongLived chooses the connections worth more subflows ([A-MPTCP]
// §III.B): those to a whitelisted destination at once, the others once
// they have carried MinBytes.
type LongLived struct {
	Whitelist []Destination `yaml:"whitelist"`
	// MinBytes opens the subflows of other connections once they have
	// sent and received this many bytes together (MPTCP_INFO); 0 means
	// never when a whitelist is set, at once otherwise.
	MinBytes uint64 `yaml:"min-bytes"`
}

// Destination is a whitelist entry: a destination prefix and, if any
// are given, ports.
type Destination struct {
	Prefix string   `yaml:"prefix"`
	Ports  []uint16 `yaml:"ports"`
}

// Repair configures how broken subflows are re-created.
type Repair struct {
	// Enabled turns repair on (the default).
	Enabled *bool `yaml:"enabled"`
	// Interval is how often broken subflows are created again, and how
	// long a create waits for its handshake before it is sent again.
	Interval config.Duration `yaml:"interval"`
	// StallTime destroys a subflow that got no acknowledgement for so long
	// while retransmitting, while another subflow of its connection made
	// progress.
	StallTime config.Duration `yaml:"stall-time"`
	// MaxBackoff bounds the wait before creating again a subflow that the
	// peer refused or closed: the wait doubles from Interval up to it.
	MaxBackoff config.Duration `yaml:"max-backoff"`
}

// Backup configures the backup policy. A subflow is given backup
// priority when its RTT exceeds both RTTRatio times and RTTMargin more
// than the best subflow's of its connection: the scheduler would use it
// when the best is full, and the receiver would wait for what it carries.
// It gets regular priority again when its RTT falls below 0.8 of that
// bound, or when its connection has no regular subflow left working.
type Backup struct {
	Enabled   bool            `yaml:"enabled"`
	RTTRatio  float64         `yaml:"rtt-ratio"`
	RTTMargin config.Duration `yaml:"rtt-margin"`
}

// The defaults.
const (
	DefaultBackupRTTRatio  = 3
	DefaultBackupRTTMargin = 20 * time.Millisecond
	DefaultControlSocket   = "/run/amptcp-pm.sock"
	DefaultMaxSubflows     = 8 // the kernel's own maximum
	DefaultEquation        = 1
	DefaultTimeout         = 500 * time.Millisecond
	DefaultTries           = 2
	DefaultMaxCacheTTL     = 24 * time.Hour
	DefaultPollInterval    = 100 * time.Millisecond
	DefaultRepairEvery     = 250 * time.Millisecond
	DefaultStallTime       = 300 * time.Millisecond
	DefaultMaxBackoff      = 5 * time.Second
)

// Load reads, decodes, completes and validates a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		var c *Config
		if c, err = Parse(data); err == nil {
			return c, nil
		}
		err = fmt.Errorf("%s: %w", path, err)
	}
	return nil, err
}

// Parse decodes a configuration strictly (an unknown field is an error),
// applies the defaults and validates it; the error lists every problem.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := config.Decode(data, &c); err != nil {
		return nil, err
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Defaults fills in what the file left out.
func (c *Config) Defaults() {
	if c.Policy == "" {
		c.Policy = PolicyDefault
	}
	if c.MaxSubflows == 0 {
		c.MaxSubflows = DefaultMaxSubflows
	}
	setBool(&c.KernelLimit, true)
	if c.Policy == PolicyAMPTCP && c.AMPTCP == nil {
		c.AMPTCP = &AMPTCP{}
	}
	if a := c.AMPTCP; a != nil {
		if a.Equation == 0 {
			a.Equation = DefaultEquation
		}
		setDuration(&a.Timeout, DefaultTimeout)
		if a.Tries == 0 {
			a.Tries = DefaultTries
		}
		setBool(&a.Cache, true)
		setDuration(&a.MaxCacheTTL, DefaultMaxCacheTTL)
	}
	setDuration(&c.PollInterval, DefaultPollInterval)
	setBool(&c.Repair.Enabled, true)
	setDuration(&c.Repair.Interval, DefaultRepairEvery)
	setDuration(&c.Repair.StallTime, DefaultStallTime)
	setDuration(&c.Repair.MaxBackoff, DefaultMaxBackoff)
	if c.Backup.RTTRatio == 0 {
		c.Backup.RTTRatio = DefaultBackupRTTRatio
	}
	setDuration(&c.Backup.RTTMargin, DefaultBackupRTTMargin)
	if c.Congestion != nil {
		c.Congestion.defaults()
	}
	if c.Control.Socket == "" {
		c.Control.Socket = DefaultControlSocket
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
}

func setBool(b **bool, def bool) {
	if *b == nil {
		*b = &def
	}
}

func setDuration(d *config.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// checker collects the problems of a configuration.
type checker struct{ errs config.Errors }

func (ck *checker) add(path, format string, args ...any) {
	ck.errs = append(ck.errs, config.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (ck *checker) positive(path string, d config.Duration) {
	if d.Duration <= 0 {
		ck.add(path, "must be positive")
	}
}

// Validate returns every problem of the configuration at once, as
// config.Errors.
func (c *Config) Validate() error {
	var ck checker
	if !slices.Contains(Policies, c.Policy) {
		ck.add("policy", "%q is not one of %v", c.Policy, Policies)
	}
	switch {
	case c.Policy == PolicySubflows || c.Policy == PolicyNdiffports:
		if c.Subflows < 1 {
			ck.add("subflows", "missing: the %s policy needs the number of subflows, the first included", c.Policy)
		}
	case c.Policy == PolicyBinder:
		if c.Subflows < 0 {
			ck.add("subflows", "must not be negative (left out: a subflow per gateway)")
		}
	case c.Subflows != 0:
		ck.add("subflows", "only the subflows, ndiffports and binder policies take a number of subflows")
	}
	if c.MaxSubflows < 1 || c.MaxSubflows > 255 {
		ck.add("max-subflows", "%d is not between 1 and 255", c.MaxSubflows)
	}
	if a := c.AMPTCP; a != nil {
		a.validate(&ck)
	}
	c.LongLived.validate(&ck)
	ck.positive("poll-interval", c.PollInterval)
	ck.positive("repair.interval", c.Repair.Interval)
	ck.positive("repair.stall-time", c.Repair.StallTime)
	if c.Backup.RTTRatio < 1 {
		ck.add("backup.rtt-ratio", "%g is below 1: every subflow would be slower than the best", c.Backup.RTTRatio)
	}
	ck.positive("backup.rtt-margin", c.Backup.RTTMargin)
	if c.Congestion != nil {
		c.Congestion.validate(&ck)
	}
	if c.Repair.MaxBackoff.Duration < c.Repair.Interval.Duration {
		ck.add("repair.max-backoff", "%v is shorter than repair.interval", c.Repair.MaxBackoff)
	}
	for i, s := range c.Announce {
		if _, err := netip.ParseAddr(s); err != nil {
			ck.add(fmt.Sprintf("announce[%d]", i), "%q is not an IP address", s)
		}
	}
	if len(c.Announce) > 255 {
		ck.add("announce", "%d addresses: an address ID has 8 bits", len(c.Announce))
	}
	ck.errs = append(ck.errs, c.Log.Validate()...)
	ck.errs = append(ck.errs, c.Metrics.Validate()...)
	if len(ck.errs) > 0 {
		return ck.errs
	}
	return nil
}

func (a *AMPTCP) validate(ck *checker) {
	if a.MapResolver == "" {
		ck.add("amptcp.map-resolver", "missing: the amptcp policy asks a map-resolver for the peer's mapping")
	} else if _, err := config.ListenAddr(a.MapResolver); err != nil {
		ck.add("amptcp.map-resolver", "%v", err)
	}
	if a.XTR != "" {
		if _, err := config.ListenAddr(a.XTR); err != nil {
			ck.add("amptcp.xtr", "%v", err)
		}
	}
	if a.Source != "" {
		if _, err := netip.ParseAddr(a.Source); err != nil {
			ck.add("amptcp.source", "%q is not an IP address", a.Source)
		}
	}
	if a.InstanceID != nil && *a.InstanceID > 0xffffff {
		ck.add("amptcp.instance-id", "%d exceeds the 24 bits of an instance ID", *a.InstanceID)
	}
	if a.Equation != 1 && a.Equation != 2 {
		ck.add("amptcp.equation", "%d is not 1 or 2 ([A-MPTCP] §III.A)", a.Equation)
	}
	ck.positive("amptcp.timeout", a.Timeout)
	if a.Tries < 1 {
		ck.add("amptcp.tries", "must be at least 1")
	}
	ck.positive("amptcp.max-cache-ttl", a.MaxCacheTTL)
}

func (l *LongLived) validate(ck *checker) {
	for i, d := range l.Whitelist {
		path := fmt.Sprintf("long-lived.whitelist[%d]", i)
		if _, err := d.prefix(); err != nil {
			ck.add(path+".prefix", "%v", err)
		}
		for j, p := range d.Ports {
			if p == 0 {
				ck.add(fmt.Sprintf("%s.ports[%d]", path, j), "port 0 is no destination port")
			}
		}
	}
}

func (d Destination) prefix() (netip.Prefix, error) {
	if d.Prefix == "" {
		return netip.Prefix{}, errors.New("missing")
	}
	p, err := netip.ParsePrefix(d.Prefix)
	if err != nil {
		if a, err := netip.ParseAddr(d.Prefix); err == nil {
			return netip.PrefixFrom(a, a.BitLen()), nil
		}
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix like 10.2.0.0/16 or an address", d.Prefix)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%s has host bits set: the prefix is %s", p, p.Masked())
	}
	return p, nil
}

// announceAddrs returns the addresses to announce.
func (c *Config) announceAddrs() []netip.Addr {
	var out []netip.Addr
	for _, s := range c.Announce {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
