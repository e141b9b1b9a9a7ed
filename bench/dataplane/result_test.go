package dataplane

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1}, 10},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median reordered its input: %v", tc.in)
			}
		}
	}
}

// measured is a successful run with a goodput.
func measured(rep int, profile, variant string, streams int, gbps float64) Measurement {
	return Measurement{Repetition: rep, Profile: profile, Variant: variant, Streams: streams, Gbps: gbps,
		Mpps: gbps / 100, BytesPerPacket: 64000, UnderlayMpps: gbps / 10, UnderlayBytesPerPacket: 1500,
		CPUPerGbps: 1 / gbps, OwnCPUPerGbps: 0.5 / gbps, Iperf: &Iperf{Retransmits: uint64(rep)}}
}

func variantResults(up map[string]bool, names ...string) []VariantResult {
	var vs []VariantResult
	for _, n := range names {
		vr := VariantResult{Variant: *variantByName(n), Up: up[n]}
		if !vr.Up {
			vr.Error = "lispd xtr on r1 exited: exit status 1\n  lispd's log ends with:\n    dataplane: not implemented yet"
		}
		vs = append(vs, vr)
	}
	return vs
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSummarize checks the medians, the paired ratios and the targets.
func TestSummarize(t *testing.T) {
	up := map[string]bool{"plain": true, "plain-3": true, "vxlan": true, "lisp": true, "lisp-rtr": false}
	r := &Result{
		Repetitions: 3, Streams: []int{1}, Profiles: []Profile{Profiles[0]},
		Variants: variantResults(up, "plain", "plain-3", "vxlan", "lisp", "lisp-rtr"),
	}
	// The machine slows down in repetition 2: the paired ratios hold
	// where the ratio of the medians would not.
	for rep, scale := range []float64{1: 1, 2: 0.5, 3: 1} {
		if rep == 0 {
			continue
		}
		r.Runs = append(r.Runs,
			measured(rep, "gso", "plain", 1, 10*scale),
			measured(rep, "gso", "plain-3", 1, 9*scale),
			measured(rep, "gso", "vxlan", 1, 8*scale),
			measured(rep, "gso", "lisp", 1, 9.7*scale))
	}
	// lisp's third repetition failed: two pairs remain.
	r.Runs[len(r.Runs)-1].Error = "iperf3: the client has terminated"
	r.summarize()

	if len(r.Summaries) != 5 {
		t.Fatalf("%d summaries, want 5: %+v", len(r.Summaries), r.Summaries)
	}
	plain, vxlan, lisp, rtr := r.Summaries[0], r.Summaries[2], r.Summaries[3], r.Summaries[4]
	if plain.Runs != 3 || plain.Gbps != 10 || plain.GbpsMin != 5 || plain.GbpsMax != 10 || plain.Ratio != nil ||
		plain.Mpps != 0.1 || plain.UnderlayMpps != 1 || plain.UnderlayBytesPerPacket != 1500 || plain.Retransmits != 2 ||
		plain.CPUPerGbps != 0.1 || plain.OwnCPUPerGbps != 0.05 {
		t.Errorf("plain: %+v", plain)
	}
	if vxlan.Reference != "plain" || vxlan.Ratio == nil || !near(*vxlan.Ratio, 0.8) {
		t.Errorf("vxlan: %+v", vxlan)
	}
	if lisp.Runs != 2 || !near(lisp.Gbps, (9.7+4.85)/2) || lisp.Error != "iperf3: the client has terminated" ||
		lisp.Ratio == nil || !near(*lisp.Ratio, 0.97) {
		t.Errorf("lisp: %+v", lisp)
	}
	if rtr.Runs != 0 || rtr.Error == "" || rtr.Ratio != nil {
		t.Errorf("lisp-rtr: %+v", rtr)
	}

	if len(r.Targets) != 4 {
		t.Fatalf("targets: %+v", r.Targets)
	}
	itr, rtrT, cpu, cpuRTR := r.Targets[0], r.Targets[1], r.Targets[2], r.Targets[3]
	if itr.Name != "ITR/ETR" || itr.Status != Met || !near(*itr.Ratio, 0.97) || !near(*itr.VsVXLAN, 9.7/8) ||
		itr.Want != "≥ 0.95 × plain and > vxlan" {
		t.Errorf("ITR/ETR target: %+v", itr)
	}
	if rtrT.Name != "RTR" || rtrT.Status != NotMeasured || rtrT.Reason != "lisp-rtr did not come up" || rtrT.Want != "≥ 0.95 × plain-3" {
		t.Errorf("RTR target: %+v", rtrT)
	}
	// lisp spends 0.5/9.7 per Gbit/s where plain spends 0.5/10.
	if cpu.Name != "CPU" || cpu.Variant != "lisp" || cpu.Status != Met || !near(*cpu.Ratio, 10/9.7) ||
		cpu.Want != "≤ 1.10 × plain's CPU/Gbit/s" {
		t.Errorf("CPU target: %+v", cpu)
	}
	if cpuRTR.Variant != "lisp-rtr" || cpuRTR.Status != NotMeasured {
		t.Errorf("CPU target of lisp-rtr: %+v", cpuRTR)
	}
}

// TestTargetsWithARate: with iperf3 capped, every path carries the rate
// and the goodputs judge nothing; the CPU they spend still does.
func TestTargetsWithARate(t *testing.T) {
	all := map[string]bool{"plain": true, "vxlan": true, "lisp": true}
	r := &Result{Repetitions: 1, Rate: 2, Streams: []int{1}, Profiles: []Profile{Profiles[1]},
		Variants: variantResults(all, "plain", "vxlan", "lisp")}
	for v, own := range map[string]float64{"plain": 0.1, "vxlan": 0.15, "lisp": 0.12} {
		m := measured(1, "wire", v, 1, 2)
		m.OwnCPUPerGbps = own
		r.Runs = append(r.Runs, m)
	}
	r.summarize()
	if len(r.Targets) != 2 {
		t.Fatalf("targets: %+v", r.Targets)
	}
	if tg := r.Targets[0]; tg.Status != NotMeasured || tg.Reason != "--rate caps the goodputs: compare CPU per Gbit/s" {
		t.Errorf("throughput target: %+v", tg)
	}
	if tg := r.Targets[1]; tg.Name != "CPU" || tg.Status != Missed || !near(*tg.Ratio, 1.2) {
		t.Errorf("CPU target: %+v", tg)
	}
}

func TestTargets(t *testing.T) {
	all := map[string]bool{"plain": true, "plain-3": true, "vxlan": true, "lisp": true, "lisp-rtr": true}
	for _, tc := range []struct {
		name                    string
		variants                []string
		plain, vxlan, lisp      float64 // 0: not run
		plain3, rtr             float64
		wantITR, wantRTR        string
		wantReasonITR, wantRTR2 string
	}{
		{name: "both met", variants: VariantNames(), plain: 10, vxlan: 8, lisp: 9.5, plain3: 9, rtr: 8.6, wantITR: Met, wantRTR: Met},
		{name: "below 0.95", variants: VariantNames(), plain: 10, vxlan: 8, lisp: 9.4, plain3: 9, rtr: 8.5, wantITR: Missed, wantRTR: Missed},
		{name: "not above vxlan", variants: VariantNames(), plain: 10, vxlan: 10, lisp: 10, plain3: 9, rtr: 9, wantITR: Missed, wantRTR: Met},
		{name: "no vxlan", variants: []string{"plain", "lisp"}, plain: 10, lisp: 10,
			wantITR: NotMeasured, wantReasonITR: "vxlan was not measured with it"},
		{name: "no reference", variants: []string{"lisp", "lisp-rtr"}, lisp: 10, rtr: 9,
			wantITR: NotMeasured, wantReasonITR: "plain was not measured (add it to --variants)",
			wantRTR: NotMeasured, wantRTR2: "plain-3 was not measured (add it to --variants)"},
	} {
		r := &Result{Repetitions: 1, Streams: []int{4}, Profiles: []Profile{Profiles[1]}, Variants: variantResults(all, tc.variants...)}
		for v, g := range map[string]float64{"plain": tc.plain, "vxlan": tc.vxlan, "lisp": tc.lisp, "plain-3": tc.plain3, "lisp-rtr": tc.rtr} {
			if g > 0 {
				r.Runs = append(r.Runs, measured(1, "wire", v, 4, g))
			}
		}
		r.summarize()
		got := map[string]Target{}
		for _, tg := range r.Targets {
			if tg.Profile != "wire" || tg.Streams != 4 {
				t.Errorf("%s: target %+v", tc.name, tg)
			}
			got[tg.Name] = tg
		}
		if tg := got["ITR/ETR"]; tg.Status != tc.wantITR || tg.Reason != tc.wantReasonITR {
			t.Errorf("%s: ITR/ETR %s (%s), want %s (%s)", tc.name, tg.Status, tg.Reason, tc.wantITR, tc.wantReasonITR)
		}
		if tg, ok := got["RTR"]; ok != (tc.wantRTR != "") || tg.Status != tc.wantRTR || tg.Reason != tc.wantRTR2 {
			t.Errorf("%s: RTR %+v, want %q (%s)", tc.name, tg, tc.wantRTR, tc.wantRTR2)
		}
	}
}
