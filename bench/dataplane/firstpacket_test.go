package dataplane

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestFirstPacketOptions(t *testing.T) {
	var o FirstPacketOptions
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.EIDs != DefaultEIDs || o.ResolverRTT != DefaultResolverRTT || o.PathRTT != DefaultPathRTT || o.Miss != "hold" ||
		o.SetupTimeout != DefaultSetupTimeout || !strings.HasPrefix(o.Prefix, "amptcp-bench-") {
		t.Errorf("defaults: %+v", o)
	}
	bad := FirstPacketOptions{EIDs: 300, ResolverRTT: -time.Second, PathRTT: time.Minute, Miss: "native-forward",
		ConnectTimeout: time.Millisecond, LinkPrefix: "far-too-long"}
	err := bad.Validate()
	for _, want := range []string{"eids: 300 is not between 1 and 250", "resolver-rtt: -1s is not between 0 and 10s",
		"path-rtt: 1m0s is not between 0 and 10s", `miss: "native-forward" is not hold or drop`,
		"connect-timeout: 1ms is shorter than 100ms", `link prefix: "far-too-long" is longer than 8 bytes`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// fpResult is a run of 20 trials, the last failed, the 19th with a SYN
// retransmitted.
func fpResult(coldOver float64) *FirstPacketResult {
	r := &FirstPacketResult{EIDs: 20, Miss: "hold", ResolverRTT: 10, PathRTT: 20}
	for i := range 20 {
		tr := Trial{EID: eidAt(i).String(), ResolverMs: 10 + float64(i%3)/10, WarmMs: 20 + float64(i%5)/10}
		tr.ColdMs = tr.ResolverMs + tr.WarmMs + coldOver + float64(i)/10
		switch i {
		case 18:
			tr.Retransmits = 1
			tr.ColdMs += 1000
		case 19:
			tr = Trial{EID: tr.EID, Error: "cold connection: dial tcp4 192.168.3.20:5300: i/o timeout"}
		}
		r.Trials = append(r.Trials, tr)
	}
	r.summarize()
	return r
}

func TestFirstPacketSummary(t *testing.T) {
	r := fpResult(0.5)
	if r.Failed != 1 || r.Retransmitted != 1 || r.Target != Missed {
		t.Errorf("failed %d, retransmitted %d, target %s", r.Failed, r.Retransmitted, r.Target)
	}
	// 19 trials: the median is the 10th, the 95th percentile the 19th
	// (the one that retransmitted).
	if !near(r.Resolver.Median, 10.1) || !near(r.Warm.Median, 20.2) || r.Cold.P95 < 1000 || !near(r.Over.Median, 1.4) {
		t.Errorf("quantiles: cold %+v warm %+v resolver %+v over %+v", r.Cold, r.Warm, r.Resolver, r.Over)
	}
	if !near(r.TargetLimit, 10.1+20.2+2) {
		t.Errorf("target limit %v", r.TargetLimit)
	}
	// Without the failure and the retransmission, the medians decide.
	for _, over := range []float64{0, 2} {
		r := fpResult(over)
		r.Trials = r.Trials[:18]
		r.summarize()
		want := Met
		if over > 0 {
			want = Missed
		}
		if r.Target != want {
			t.Errorf("%g ms over: target %s (cold median %v, limit %v), want %s", over, r.Target, r.Cold.Median, r.TargetLimit, want)
		}
	}
	empty := &FirstPacketResult{}
	if empty.summarize(); empty.Target != NotMeasured {
		t.Errorf("no trial: target %s", empty.Target)
	}
}

func TestFirstPacketText(t *testing.T) {
	r := fpResult(0.5)
	r.Counters = map[string]uint64{"held": 20, "released": 19, "dropped-unresolved": 1, "dropped-eid-full": 0}
	var b strings.Builder
	if err := WriteFirstPacketText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"New TCP connections to 20 fresh EIDs through lispd's xTRs (miss: hold), emulated WAN links:",
		"  cold: to an EID not in the map-cache         31.80   1032.60\n",
		"  (ms; 19 trials measured, 1 failed; 1 cold connection retransmitted its SYN)",
		"r1's held packets: dropped-unresolved 1, held 20, released 19\n",
		"target: cold ≤ Map-Request + warm + 2.00 ms (medians, = 32.30 ms), no SYN retransmitted: MISSED",
		"  192.168.3.20: cold connection: dial tcp4 192.168.3.20:5300: i/o timeout",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	b2, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Trials []struct {
			EID   string  `json:"eid"`
			Cold  float64 `json:"cold_ms"`
			Retr  uint32  `json:"retransmits"`
			Error string  `json:"error"`
		} `json:"trials"`
		Target string `json:"target"`
	}
	if err := json.Unmarshal(b2, &j); err != nil || len(j.Trials) != 20 || j.Trials[18].Retr != 1 || j.Trials[19].Error == "" || j.Target != Missed {
		t.Errorf("JSON: %+v, %v", j, err)
	}
}
