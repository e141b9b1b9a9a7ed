// Package config is lispd's configuration: one YAML file, decoded strictly
// (an unknown field is an error), completed with defaults, and validated
// with every problem reported at once by its path (sites[2].keys[0].secret).
//
// The daemon has one Go API; this file format, its command line and its
// control socket are clients of it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lisp"
	"gopkg.in/yaml.v3"
)

// Config is lispd's configuration.
type Config struct {
	// Roles lispd runs: map-server, map-resolver, ddt-node (a node of
	// the Delegated Database Tree, RFC 8111), xtr (an ITR and ETR), rtr
	// (a re-encapsulating tunnel router), te (traffic engineering of the
	// overlay's ELPs).
	Roles []Role `yaml:"roles"`
	// Listen are the addresses of the control sockets (UDP 4342 unless a
	// port is given): "0.0.0.0", "::", "192.0.2.1", "[2001:db8::1]:4342".
	Listen  []string `yaml:"listen"`
	Log     Log      `yaml:"log"`
	Metrics Metrics  `yaml:"metrics"`
	Control Control  `yaml:"control"`

	MapServer   *MapServer   `yaml:"map-server"`
	MapResolver *MapResolver `yaml:"map-resolver"`
	DDTNode     *DDTNode     `yaml:"ddt-node"`

	// The tunnel routers: the xtr and rtr roles forward in eBPF
	// (Dataplane) with the mappings they resolve (MapCache); the xtr
	// registers its site's (XTR).
	Dataplane *Dataplane `yaml:"dataplane"`
	MapCache  *MapCache  `yaml:"map-cache"`
	XTR       *XTR       `yaml:"xtr"`

	// TE computes the ELPs that Map-Replies carry (the te role).
	TE *TE `yaml:"te"`
}

// Role is a job lispd does.
type Role string

const (
	RoleMapServer   Role = "map-server"
	RoleMapResolver Role = "map-resolver"
	RoleDDTNode     Role = "ddt-node"
	RoleXTR         Role = "xtr"
	RoleRTR         Role = "rtr"
	RoleTE          Role = "te"
)

// Roles are all the roles, in the order they are documented.
var Roles = []Role{RoleMapServer, RoleMapResolver, RoleDDTNode, RoleXTR, RoleRTR, RoleTE}

// Log configures log/slog.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Logger returns the logger these settings describe, writing to w.
func (l Log) Logger(w io.Writer) *slog.Logger { return l.LoggerAt(w, new(slog.LevelVar)) }

// LoggerAt is Logger with its level in level, set to l's: a reload
// changes it there.
func (l Log) LoggerAt(w io.Writer, level *slog.LevelVar) *slog.Logger {
	var lv slog.Level
	lv.UnmarshalText([]byte(l.Level)) // validated
	level.Set(lv)
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is the HTTP address of /metrics; empty turns it off.
	Listen string `yaml:"listen"`
}

// Control configures the local control socket that `lispd status` uses.
type Control struct {
	Socket string `yaml:"socket"`
}

// MapServer configures the map-server role.
type MapServer struct {
	// RegistrationTimeout drops a registration not refreshed in time,
	// unless its Map-Register set the T bit (then its record TTL counts).
	RegistrationTimeout Duration `yaml:"registration-timeout"`
	// ProxyReplyTTL is the record TTL of the Map-Replies the map-server
	// sends for ETRs that asked it to reply for them.
	ProxyReplyTTL Duration `yaml:"proxy-reply-ttl"`
	// ReplayWindow is how far the time in a Map-Register's nonce may be
	// from the map-server's clock, for the sites with anti-replay.
	ReplayWindow Duration `yaml:"replay-window"`
	Sites        []Site   `yaml:"sites"`
	// DDT says what the map-server answers DDT Map-Requests with.
	DDT *MapServerDDT `yaml:"ddt"`
}

// Site is a LISP site: the EID-prefixes its ETRs may register and the
// keys they authenticate with.
type Site struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Keys        []Key       `yaml:"keys"`
	EIDPrefixes []EIDPrefix `yaml:"eid-prefixes"`
	// AllowUnauthenticated accepts Map-Registers with algorithm 0. Off by
	// default: anyone could then replace the site's RLOCs.
	AllowUnauthenticated bool `yaml:"allow-unauthenticated"`
	// ProxyReply lets the map-server answer Map-Requests for the site's
	// ETRs when they ask for it (the P bit). On by default.
	ProxyReply *bool `yaml:"proxy-reply"`
	// AntiReplay refuses a Map-Register whose nonce is not newer than the
	// last one accepted from the same xTR, or whose time is outside the
	// replay window: lispd's xTRs send the time as nonce. On by default;
	// off for xTRs that send random nonces.
	AntiReplay *bool `yaml:"anti-replay"`
}

// Key is a shared secret of a site.
type Key struct {
	ID        uint8  `yaml:"id"`
	Algorithm string `yaml:"algorithm"` // hmac-sha256 (default) or hmac-sha1
	// Secret is the key itself; SecretFile names a file holding it
	// instead (trailing newlines are ignored).
	Secret     string `yaml:"secret"`
	SecretFile string `yaml:"secret-file"`
}

// EIDPrefix is a prefix a site may register.
type EIDPrefix struct {
	Prefix     string `yaml:"prefix"`
	InstanceID uint32 `yaml:"instance-id"`
	// AcceptMoreSpecifics lets the site register prefixes inside this one.
	AcceptMoreSpecifics bool `yaml:"accept-more-specifics"`
}

// MapResolver configures the map-resolver role.
type MapResolver struct {
	// NegativeTTL is the TTL of negative Map-Replies for EIDs outside every
	// configured site (RFC 9301: 15 minutes).
	NegativeTTL Duration `yaml:"negative-ttl"`
	// UnregisteredTTL is the TTL of negative Map-Replies for EIDs in a
	// site's prefix that no ETR has registered (RFC 9301: 1 minute).
	UnregisteredTTL Duration `yaml:"unregistered-ttl"`
	// RateLimit bounds the Map-Requests accepted from one source; left
	// out, it is 1000 per second with bursts of 2000.
	RateLimit *RateLimit `yaml:"rate-limit"`
	// DDT resolves the EIDs no local site holds through LISP-DDT.
	DDT *ResolverDDT `yaml:"ddt"`
}

// RateLimit bounds the Map-Requests accepted from one source address.
type RateLimit struct {
	// PerSecond is the sustained rate; 0 turns the limit off.
	PerSecond float64 `yaml:"per-second"`
	Burst     int     `yaml:"burst"`
}

// Duration is a time.Duration written as "3m", "90s" or "24h" in YAML.
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (like 90s, 3m or 24h)", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Load reads, decodes, completes and validates a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a configuration strictly, applies the defaults and
// validates it.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := Decode(data, &c); err != nil {
		return nil, err
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Decode decodes YAML into v strictly: an unknown field is an error, in
// words for people. An empty document leaves v as it is. amptcp's other
// configurations (`amptcp pm`) decode with it too.
func Decode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file
		return yamlError(err)
	}
	return nil
}

var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// yamlError rewords yaml.v3's errors for people: "unknown field" rather
// than Go type names.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = unknownField.ReplaceAllString(m, `unknown field "$1"`)
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// Has reports whether the configuration runs role.
func (c *Config) Has(role Role) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// AuthAlgorithm maps a key's algorithm name to its Algorithm ID.
func AuthAlgorithm(name string) (lisp.AuthAlgorithm, error) {
	switch name {
	case "hmac-sha256":
		return lisp.AuthHMACSHA256, nil
	case "hmac-sha1":
		return lisp.AuthHMACSHA1, nil
	}
	return 0, fmt.Errorf("%q is not hmac-sha256 or hmac-sha1", name)
}
