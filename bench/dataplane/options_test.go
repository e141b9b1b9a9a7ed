package dataplane

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Variants, []string{"plain", "plain-3", "vxlan", "lisp", "lisp-rtr"}) ||
		!slices.Equal(o.Profiles, []string{"gso", "wire"}) || !slices.Equal(o.Streams, []int{1, 4}) ||
		o.Duration != 10*time.Second || o.Repetitions != 3 || o.Congestion != "cubic" || o.SetupTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", o)
	}
	if !strings.HasPrefix(o.Prefix, "amptcp-bench-") || !strings.HasPrefix(o.LinkPrefix, "ab") || len(o.LinkPrefix) > maxLinkPrefix {
		t.Errorf("prefixes %q, %q", o.Prefix, o.LinkPrefix)
	}
	if o.Runs() != 60 {
		t.Errorf("%d runs, want 5 variants × 2 profiles × 2 stream counts × 3 repetitions = 60", o.Runs())
	}
	// Each run and a second around it, two seconds to set up a variant.
	if got := Estimate(Options{}); got != 60*11*time.Second+5*2*time.Second {
		t.Errorf("Estimate = %v", got)
	}
}

func TestOptionsErrors(t *testing.T) {
	o := Options{
		Variants: []string{"plain", "gre", "plain"}, Profiles: []string{"jumbo"}, Streams: []int{0, 4, 4},
		Duration: 1500 * time.Millisecond, Repetitions: -1, Congestion: "cu bic", SetupTimeout: time.Millisecond,
		LinkPrefix: "much-too-long",
	}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`variants: unknown variant "gre" (want some of plain, plain-3, vxlan, lisp, lisp-rtr, plain-xdp, lisp-xdp)`,
		"variants: plain named twice",
		`profiles: unknown profile "jumbo" (want some of gso, wire)`,
		"streams: 0 is not between 1 and 128",
		"streams: 4 named twice",
		"duration: 1.5s is not a whole number of seconds",
		"repetitions: -1 is not between 1 and 100",
		`congestion: "cu bic"`,
		"setup-timeout: 1ms is shorter than 1s",
		`link prefix: "much-too-long" is longer than 8 bytes`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A variant of one profile only wants that profile among --profiles; the
// runs count only the pairs measured.
func TestOptionsProfilesOfAVariant(t *testing.T) {
	o := Options{Variants: []string{"lisp", "lisp-xdp"}, Profiles: []string{"gso"}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "variants: lisp-xdp is measured in the wire profile only") {
		t.Errorf("lisp-xdp in gso only: %v", err)
	}
	o = Options{Variants: []string{"lisp", "lisp-xdp"}, Streams: []int{1}, Repetitions: 1}
	if err := o.Validate(); err != nil || o.Runs() != 3 {
		t.Errorf("lisp in two profiles, lisp-xdp in one: %v, %d runs", err, o.Runs())
	}
}
