package pm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
)

// An empty file is the default policy with every default filled in.
func TestConfigDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != PolicyDefault || c.MaxSubflows != DefaultMaxSubflows || !*c.KernelLimit || !*c.Repair.Enabled ||
		c.Repair.Interval.Duration != DefaultRepairEvery || c.Repair.StallTime.Duration != DefaultStallTime ||
		c.PollInterval.Duration != DefaultPollInterval || c.Control.Socket != DefaultControlSocket ||
		c.Log.Level != "info" || c.AMPTCP != nil {
		t.Errorf("defaults %+v", c)
	}
	c, err = Parse([]byte("policy: amptcp\namptcp: {map-resolver: 10.0.100.2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.AMPTCP
	if a.Equation != 1 || a.Tries != DefaultTries || a.Timeout.Duration != DefaultTimeout || !*a.Cache ||
		a.MaxCacheTTL.Duration != 24*time.Hour {
		t.Errorf("amptcp defaults %+v", a)
	}
}

// Every problem is reported at once, each with the path of its field.
func TestConfigErrorsNameTheirFields(t *testing.T) {
	_, err := Parse([]byte(`
policy: amptcp
subflows: 3
max-subflows: 300
amptcp:
  map-resolver: resolver.example
  xtr: 10.1.0.254:99999
  source: nowhere
  instance-id: 16777216
  equation: 3
  timeout: -1s
  tries: -1
long-lived:
  whitelist:
    - {prefix: 10.2.0.1/16, ports: [0]}
    - {ports: [80]}
repair: {interval: 500ms, max-backoff: 100ms}
announce: [10.2.0.300]
log: {level: loud, format: xml}
metrics: {listen: "9100"}
`))
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v is not config.Errors", err)
	}
	for _, path := range []string{
		"subflows", "max-subflows", "amptcp.map-resolver", "amptcp.xtr", "amptcp.source", "amptcp.instance-id",
		"amptcp.equation", "amptcp.timeout", "amptcp.tries", "long-lived.whitelist[0].prefix",
		"long-lived.whitelist[0].ports[0]", "long-lived.whitelist[1].prefix", "repair.max-backoff",
		"announce[0]", "log.level", "log.format", "metrics.listen",
	} {
		found := false
		for _, fe := range errs {
			found = found || fe.Path == path
		}
		if !found {
			t.Errorf("no error for %s in:\n%v", path, err)
		}
	}
	if len(errs) != 17 {
		t.Errorf("%d errors, want 17:\n%v", len(errs), err)
	}
}

func TestConfigPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"policy: bittorrent\n", `policy: "bittorrent" is not one of`},
		{"policy: ndiffports\n", "subflows: missing"},
		{"policy: subflows\n", "subflows: missing"},
		{"policy: amptcp\n", "amptcp.map-resolver: missing"},
		{"policy: fullmesh\nsubflows: 2\n", "subflows: only the subflows, ndiffports and binder policies"},
		{"policy: default\nrepair: {stall-time: 0s, interval: -1s}\n", "repair.interval: must be positive"},
		{"poliсy: default\n", `unknown field "poliсy"`},
		{"policy: default\namptcp: {map-resolver: 10.0.0.1, cache-ttl: 1m}\n", `unknown field "cache-ttl"`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// The congestion control and backup sections: amptcp's names become the
// kernel's, and their mistakes are named by path.
func TestConfigCongestionAndBackup(t *testing.T) {
	c, err := Parse([]byte(`
congestion:
  algorithm: lia
  subflows:
    - {rtt-above: 100ms, algorithm: wvegas}
    - {local: 10.0.2.0/24, algorithm: reno}
backup: {enabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Congestion
	if g.Algorithm != "amp_lia" || g.Subflows[0].Algorithm != "amp_wvegas" || g.Subflows[1].Algorithm != "reno" {
		t.Errorf("names %q %q %q, want amp_lia amp_wvegas reno", g.Algorithm, g.Subflows[0].Algorithm, g.Subflows[1].Algorithm)
	}
	if !c.Backup.Enabled || c.Backup.RTTRatio != DefaultBackupRTTRatio || c.Backup.RTTMargin.Duration != DefaultBackupRTTMargin {
		t.Errorf("backup defaults %+v", c.Backup)
	}
	_, err = Parse([]byte(`
congestion:
  subflows:
    - {local: 10.0.2.0/33, remote: fd00::/64, rtt-above: -1s, algorithm: "not a name"}
backup: {rtt-ratio: 0.5, rtt-margin: -1ms}
`))
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v is not config.Errors", err)
	}
	for _, path := range []string{"congestion.algorithm", "congestion.subflows[0].local", "congestion.subflows[0].remote",
		"congestion.subflows[0].rtt-above", "congestion.subflows[0].algorithm", "backup.rtt-ratio", "backup.rtt-margin"} {
		if !strings.Contains(err.Error(), path+":") {
			t.Errorf("no error for %s in:\n%v", path, err)
		}
	}
}
