package xtr

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
)

const joinConfig = `
roles: [xtr]
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [192.0.2.1], probe-interval: 1s}
xtr:
  database-mappings:
    - eid-prefix: 10.1.0.0/16
      locators: [{address: 198.51.100.1, priority: 2, weight: 100}]
  map-servers: [{address: 192.0.2.1, key-id: 3, secret: "` + keyA + `"}]
  join: {rtrs: [192.0.2.11, 192.0.2.12, 192.0.2.13], count: 2}
`

// TestJoin: the xTR registers ELPs through the two RTRs closest to it,
// before its own RLOC; a chosen RTR going down replaces it at once; a
// closer one only after three evaluations and the hold-down.
func TestJoin(t *testing.T) {
	h := newHarness(t, joinConfig)
	cfg, _ := config.Parse([]byte(joinConfig))
	j := NewJoin(cfg.XTR, h.x)
	rtts := map[string]time.Duration{"192.0.2.11": 30 * time.Millisecond, "192.0.2.12": 10 * time.Millisecond, "192.0.2.13": 20 * time.Millisecond}
	down := map[string]bool{}
	rtt := func(a netip.Addr) (time.Duration, bool) { d, ok := rtts[a.String()]; return d, ok }
	up := func(a netip.Addr) bool { return !down[a.String()] }
	registered := func() []string {
		t.Helper()
		h.x.Tick()
		var out []string
		for _, s := range h.net.take() {
			if reg, ok := s.msg.(*lisp.MapRegister); ok {
				for _, l := range reg.Records[0].Locators {
					out = append(out, strings.ReplaceAll(l.Address.String(), " ", ""))
				}
				return out
			}
		}
		return nil
	}
	h.x.Tick()
	h.net.take()
	if changed, err := j.Evaluate(h.now, rtt, up); !changed || err != nil {
		t.Fatalf("first choice: %v %v", changed, err)
	}
	got := registered()
	if len(got) != 3 || !strings.Contains(got[0], "192.0.2.12") || !strings.Contains(got[1], "192.0.2.13") || got[2] != "198.51.100.1" {
		t.Fatalf("registered %v, want ELPs through .12 and .13, then the RLOC", got)
	}
	if !strings.HasSuffix(got[0], "->198.51.100.1}") {
		t.Errorf("the ELP %s does not end at the site's RLOC", got[0])
	}
	// .11 gets closer than .13, but only a third evaluation a minute on
	// takes it.
	rtts["192.0.2.11"] = 5 * time.Millisecond
	for i := range 3 {
		h.now = h.now.Add(time.Second)
		if changed, _ := j.Evaluate(h.now, rtt, up); changed {
			t.Fatalf("evaluation %d changed before the hold-down", i)
		}
	}
	h.now = h.now.Add(time.Minute)
	if changed, _ := j.Evaluate(h.now, rtt, up); !changed {
		t.Fatal("a closer RTR not taken after the hold-down")
	}
	if st := j.Status(); st.String() != "192.0.2.11, 192.0.2.12" || !strings.HasPrefix(st.Reason, "total RTT") {
		t.Errorf("status %+v", st)
	}
	// .12 down: replaced at once by .13.
	h.net.take()
	down["192.0.2.12"] = true
	h.now = h.now.Add(time.Second)
	if changed, _ := j.Evaluate(h.now, rtt, up); !changed {
		t.Fatal("a chosen RTR down not replaced at once")
	}
	if st := j.Status(); st.String() != "192.0.2.11, 192.0.2.13" || st.Reason != "192.0.2.12 is down" || st.Changes != 3 {
		t.Errorf("status %+v", st)
	}
	got = registered()
	if len(got) != 3 || !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "192.0.2.13") }) ||
		slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "192.0.2.12") }) {
		t.Errorf("registered %v", got)
	}
}
