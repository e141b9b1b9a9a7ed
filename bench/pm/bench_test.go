package pm

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Variants, ",") != "amptcp-pm,kernel" || strings.Join(o.Failures, ",") != "link,blackhole" ||
		o.Repetitions != DefaultRepetitions || o.Outage != DefaultOutage || o.Timeout != DefaultTimeout ||
		!strings.HasPrefix(o.Prefix, "amptcp-bpm-") || len(o.LinkPrefix) > maxLinkPrefix {
		t.Errorf("defaults: %+v", o)
	}
	if n := o.Measurements(); n != 40 {
		t.Errorf("%d measurements, want 40", n)
	}
	// 10 × 2 failures × (2 s + 0.5 s + 2 s + 1.2 s) + 5 s.
	if got := Estimate(Options{}); got != 119*time.Second {
		t.Errorf("estimate %v", got)
	}
}

func TestOptionsErrors(t *testing.T) {
	o := Options{Variants: []string{"kernel", "mptcpd", "kernel"}, Failures: []string{"fire"}, Repetitions: -1,
		Outage: time.Millisecond, Timeout: time.Hour, Prefix: "a/b", LinkPrefix: "much-too-long"}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`unknown variant "mptcpd" (amptcp-pm, kernel)`,
		`variant "kernel" given twice`,
		`unknown failure "fire" (link, blackhole)`,
		"repetitions: -1 is not between 1 and 1000",
		"outage: 1ms is not between 100ms and 10m",
		"timeout: 1h0m0s is not between 1s and 10m",
		`prefix: "a/b" contains a slash`,
		`link prefix: "much-too-long" is longer than 8 bytes`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
