package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FieldError is a problem with one field, named by its path.
type FieldError struct {
	Path, Msg string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// Errors are all the problems of a configuration, one per line.
type Errors []FieldError

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, fe := range e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

type checker struct{ errs Errors }

// unique checks that name is set and names no other kind in seen.
func (c *checker) unique(path, kind, name string, seen map[string]bool) {
	switch {
	case name == "":
		c.add(path, "missing")
	case seen[name]:
		c.add(path, "%q is the name of another %s", name, kind)
	}
	seen[name] = true
}

func (c *checker) add(path, format string, args ...any) {
	c.errs = append(c.errs, FieldError{path, fmt.Sprintf(format, args...)})
}

// Validate returns every problem of the configuration at once, as Errors.
func (c *Config) Validate() error {
	var ck checker
	if len(c.Roles) == 0 {
		ck.add("roles", "missing: name at least one of %v", Roles)
	}
	for i, r := range c.Roles {
		switch {
		case !slices.Contains(Roles, r):
			ck.add(fmt.Sprintf("roles[%d]", i), "unknown role %q (want one of %v)", r, Roles)
		case slices.Index(c.Roles, r) != i:
			ck.add(fmt.Sprintf("roles[%d]", i), "%s named twice", r)
		}
	}
	for i, l := range c.Listen {
		if _, err := ListenAddr(l); err != nil {
			ck.add(fmt.Sprintf("listen[%d]", i), "%v", err)
		}
	}
	ck.errs = append(ck.errs, c.Log.Validate()...)
	ck.errs = append(ck.errs, c.Metrics.Validate()...)
	if ms := c.MapServer; ms != nil {
		ms.validate(&ck)
	}
	if mr := c.MapResolver; mr != nil {
		mr.validate(&ck)
	}
	c.validateTunnel(&ck)
	c.validateDDT(&ck)
	if t := c.TE; t != nil {
		t.validate(&ck, c.Has(RoleTE))
	}
	if len(ck.errs) > 0 {
		return ck.errs
	}
	return nil
}

// Validate returns the problems of the log settings, at log.level and
// log.format.
func (l Log) Validate() Errors {
	var ck checker
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l.Level) {
		ck.add("log.level", "%q is not one of debug, info, warn, error", l.Level)
	}
	if l.Format != "text" && l.Format != "json" {
		ck.add("log.format", "%q is not text or json", l.Format)
	}
	return ck.errs
}

// Validate returns the problem of the metrics endpoint, at
// metrics.listen.
func (m Metrics) Validate() Errors {
	var ck checker
	if m.Listen != "" {
		if _, _, err := net.SplitHostPort(m.Listen); err != nil {
			ck.add("metrics.listen", "%q is not host:port", m.Listen)
		}
	}
	return ck.errs
}

// ListenAddr reads a listen entry: an IP address, with a port or not.
func ListenAddr(s string) (netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(ip, DefaultPort), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address or address:port", s)
	}
	return ap, nil
}

func (ms *MapServer) validate(ck *checker) {
	if ms.RegistrationTimeout.Duration <= 0 {
		ck.add("map-server.registration-timeout", "must be positive")
	}
	if ms.ProxyReplyTTL.Duration < 0 {
		ck.add("map-server.proxy-reply-ttl", "must not be negative")
	}
	if ms.ReplayWindow.Duration <= 0 {
		ck.add("map-server.replay-window", "must be positive")
	}
	if len(ms.Sites) == 0 {
		ck.add("map-server.sites", "missing: a map-server needs at least one site")
	}
	names := map[string]bool{}
	owner := map[string]string{} // "[iid]prefix" -> the path that claimed it
	for i, s := range ms.Sites {
		path := fmt.Sprintf("map-server.sites[%d]", i)
		ck.unique(path+".name", "site", s.Name, names)
		if len(s.Keys) == 0 && !s.AllowUnauthenticated {
			ck.add(path+".keys", "missing: a site needs a key unless allow-unauthenticated is set")
		}
		ids := map[uint8]bool{}
		for j, k := range s.Keys {
			kpath := fmt.Sprintf("%s.keys[%d]", path, j)
			if ids[k.ID] {
				ck.add(kpath+".id", "key ID %d used twice", k.ID)
			}
			ids[k.ID] = true
			if _, err := AuthAlgorithm(k.Algorithm); err != nil {
				ck.add(kpath+".algorithm", "%v", err)
			}
			if _, err := k.Bytes(); err != nil {
				ck.add(kpath, "%v", err)
			}
		}
		if len(s.EIDPrefixes) == 0 {
			ck.add(path+".eid-prefixes", "missing: a site needs at least one EID-prefix")
		}
		for j, e := range s.EIDPrefixes {
			epath := fmt.Sprintf("%s.eid-prefixes[%d]", path, j)
			p, err := e.Parse()
			if err != nil {
				ck.add(epath+".prefix", "%v", err)
				continue
			}
			if e.InstanceID > 0xffffff {
				ck.add(epath+".instance-id", "%d exceeds the 24 bits of an instance ID", e.InstanceID)
			}
			key := "[" + strconv.FormatUint(uint64(e.InstanceID), 10) + "]" + p.String()
			if other, ok := owner[key]; ok {
				ck.add(epath+".prefix", "%s is already %s", key, other)
			}
			owner[key] = epath
		}
	}
}

// Parse returns the prefix, which must be the network address.
func (e EIDPrefix) Parse() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(e.Prefix)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix like 10.1.0.0/16", e.Prefix)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%s has host bits set: the prefix is %s", p, p.Masked())
	}
	return p, nil
}

// Bytes returns the key's secret, read from SecretFile if that is set.
func (k Key) Bytes() ([]byte, error) {
	switch {
	case k.Secret != "" && k.SecretFile != "":
		return nil, fmt.Errorf("secret and secret-file both set: keep one")
	case k.SecretFile != "":
		b, err := os.ReadFile(k.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("secret-file: %v", err)
		}
		if b = []byte(strings.TrimRight(string(b), "\r\n")); len(b) == 0 {
			return nil, fmt.Errorf("secret-file %s is empty", k.SecretFile)
		}
		return b, nil
	case k.Secret == "":
		return nil, fmt.Errorf("secret: missing")
	}
	return []byte(k.Secret), nil
}

func (mr *MapResolver) validate(ck *checker) {
	if mr.NegativeTTL.Duration <= 0 {
		ck.add("map-resolver.negative-ttl", "must be positive")
	}
	if mr.UnregisteredTTL.Duration <= 0 {
		ck.add("map-resolver.unregistered-ttl", "must be positive")
	}
	if rl := mr.RateLimit; rl != nil {
		if rl.PerSecond < 0 {
			ck.add("map-resolver.rate-limit.per-second", "must not be negative (0 turns the limit off)")
		}
		if rl.PerSecond > 0 && rl.Burst < 1 {
			ck.add("map-resolver.rate-limit.burst", "must be at least 1")
		}
	}
}
