package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

const minimal = `
roles: [map-server, map-resolver]
map-server:
  sites:
    - name: site-a
      keys: [{id: 1, secret: s3cret}]
      eid-prefixes: [{prefix: 10.1.0.0/16}]
`

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Listen; len(got) != 2 || got[0] != "0.0.0.0" || got[1] != "::" {
		t.Errorf("listen = %q", got)
	}
	ms, mr := c.MapServer, c.MapResolver
	if ms.RegistrationTimeout.Duration != 3*time.Minute || ms.ProxyReplyTTL.Duration != 24*time.Hour {
		t.Errorf("map-server timers = %v, %v", ms.RegistrationTimeout, ms.ProxyReplyTTL)
	}
	if site := ms.Sites[0]; site.Keys[0].Algorithm != "hmac-sha256" || !*site.ProxyReply || site.AllowUnauthenticated {
		t.Errorf("site defaults = %+v", site)
	}
	if mr == nil || mr.NegativeTTL.Duration != 15*time.Minute || mr.UnregisteredTTL.Duration != time.Minute ||
		*mr.RateLimit != (RateLimit{PerSecond: 1000, Burst: 2000}) {
		t.Errorf("map-resolver defaults = %+v", mr)
	}
	if a, err := AuthAlgorithm(ms.Sites[0].Keys[0].Algorithm); err != nil || a != lisp.AuthHMACSHA256 {
		t.Errorf("default algorithm = %v, %v", a, err)
	}
}

func TestRateLimitOff(t *testing.T) {
	c, err := Parse([]byte("roles: [map-resolver]\nmap-resolver: {rate-limit: {per-second: 0}}\n"))
	if err != nil || c.MapResolver.RateLimit.PerSecond != 0 {
		t.Fatalf("rate limit off: %v, %+v", err, c)
	}
}

// Decoding is strict: a misspelt field is an error naming it and its line.
func TestUnknownFieldNamed(t *testing.T) {
	_, err := Parse([]byte("roles: [map-server]\nmap-server:\n  sites:\n    - name: a\n      kyes: []\n"))
	if err == nil || !strings.Contains(err.Error(), `line 5: unknown field "kyes"`) {
		t.Fatalf("error = %v", err)
	}
	_, err = Parse([]byte("roles: [map-resolver]\nmap-resolver: {negative-ttl: soon}\n"))
	if err == nil || !strings.Contains(err.Error(), `"soon" is not a duration`) {
		t.Fatalf("error = %v", err)
	}
}

// Every problem is reported at once, each with its path.
func TestValidateReportsEverything(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]byte(`
roles: [map-server, map-server, pitr]
listen: [192.0.2.1, "not an address"]
log: {level: loud, format: xml}
metrics: {listen: "9342"}
map-server:
  registration-timeout: -1s
  sites:
    - name: a
      keys:
        - {id: 1, algorithm: md5, secret: x}
        - {id: 1, secret: x, secret-file: /etc/hostname}
        - {id: 2, secret-file: ` + empty + `}
        - {id: 3}
      eid-prefixes:
        - {prefix: 10.1.2.3/16}
        - {prefix: 10.2.0.0/16, instance-id: 16777216}
        - {prefix: banana}
    - name: a
      eid-prefixes: [{prefix: 10.2.0.0/16, instance-id: 16777216}]
map-resolver: {negative-ttl: -5m, rate-limit: {per-second: -1}}
`))
	var errs Errors
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	errs, ok := err.(Errors)
	if !ok {
		t.Fatalf("error is %T, want Errors: %v", err, err)
	}
	want := []string{
		"roles[1]: map-server named twice",
		`roles[2]: unknown role "pitr"`,
		`listen[1]: "not an address" is not an IP address`,
		`log.level: "loud"`,
		`log.format: "xml"`,
		`metrics.listen: "9342" is not host:port`,
		"map-server.registration-timeout: must be positive",
		`map-server.sites[0].keys[0].algorithm: "md5" is not hmac-sha256 or hmac-sha1`,
		"map-server.sites[0].keys[1].id: key ID 1 used twice",
		"map-server.sites[0].keys[1]: secret and secret-file both set",
		"map-server.sites[0].keys[2]: secret-file " + empty + " is empty",
		"map-server.sites[0].keys[3]: secret: missing",
		"map-server.sites[0].eid-prefixes[0].prefix: 10.1.2.3/16 has host bits set: the prefix is 10.1.0.0/16",
		"map-server.sites[0].eid-prefixes[1].instance-id: 16777216 exceeds the 24 bits",
		`map-server.sites[0].eid-prefixes[2].prefix: "banana" is not a prefix`,
		`map-server.sites[1].name: "a" is the name of another site`,
		"map-server.sites[1].keys: missing",
		"map-server.sites[1].eid-prefixes[0].instance-id: 16777216 exceeds the 24 bits",
		"map-server.sites[1].eid-prefixes[0].prefix: [16777216]10.2.0.0/16 is already map-server.sites[0].eid-prefixes[1]",
		"map-resolver.negative-ttl: must be positive",
		"map-resolver.rate-limit.per-second: must not be negative",
	}
	text := err.Error()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("no error %q in:\n%s", w, text)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d errors, want %d:\n%s", len(errs), len(want), text)
	}
}

func TestSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Key{SecretFile: path}.Bytes()
	if err != nil || string(b) != "from a file" {
		t.Fatalf("Bytes = %q, %v", b, err)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0": "0.0.0.0:4342", "::": "[::]:4342", "127.0.0.1:14342": "127.0.0.1:14342", "[2001:db8::1]:1": "[2001:db8::1]:1",
	} {
		if got, err := ListenAddr(in); err != nil || got.String() != want {
			t.Errorf("ListenAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}

func TestEmptyFileNeedsRoles(t *testing.T) {
	if _, err := Parse(nil); err == nil || !strings.Contains(err.Error(), "roles: missing") {
		t.Fatalf("empty file: %v", err)
	}
}
