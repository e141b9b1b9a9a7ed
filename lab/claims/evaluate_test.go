package claims

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// fakeRun is a run of a saturated flow "bulk" whose receiver got rate
// (Mbit/s, a function of the seconds since the start) sampled every
// 100 ms for dur, and whose subflows acknowledged bytes while acking
// says so.
type fakeRun struct {
	id      string
	variant results.Variant
	dur     time.Duration
	rate    func(s float64) float64
	acking  func(sub int, s float64) bool
	rtts    []time.Duration // per subflow
	events  []results.Event
	errText string
	skipped string
}

func (f fakeRun) build() (*results.Run, []traffic.Record) {
	run := &results.Run{ID: f.id, Variant: f.variant, Started: t0, FlowsStart: t0, Events: f.events, Error: f.errText, Skipped: f.skipped}
	if f.skipped != "" {
		return run, nil
	}
	var recs []traffic.Record
	bytes := 0.0
	acked := make([]uint64, len(f.rtts))
	for i := 1; time.Duration(i)*100*time.Millisecond <= f.dur; i++ {
		s := float64(i) / 10
		bytes += f.rate(s) * 1e6 / 8 * 0.1
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		recs = append(recs, traffic.Record{Time: at, Flow: "bulk", Kind: traffic.KindReceiver, Role: traffic.Receiver,
			BytesReceived: uint64(bytes), Interval: 100 * time.Millisecond, Units: 10, Jitter: time.Duration(i%3) * time.Millisecond})
		for sub, rtt := range f.rtts {
			if f.acking == nil || f.acking(sub, s) {
				acked[sub] += 100_000 * uint64(sub+1)
			}
			recs = append(recs, traffic.Record{Time: at, Flow: "bulk", Kind: traffic.KindSubflow, Role: traffic.Sender,
				Subflow: uint8(sub + 1), Local: netip.MustParseAddrPort("10.1.0.2:40000"), Remote: netip.MustParseAddrPort("10.2.0.2:5001"),
				BytesSent: acked[sub] + 1000, BytesAcked: acked[sub], BytesRetrans: uint64(sub * 100), RTT: rtt, RTOs: uint16(sub)})
		}
	}
	end := t0.Add(f.dur)
	recs = append(recs,
		traffic.Record{Time: end, Flow: "bulk", Kind: traffic.KindResult, Role: traffic.Sender, FlowKind: traffic.Saturate,
			Start: t0, Completion: f.dur, BytesSent: uint64(bytes), Subflows: uint8(len(f.rtts))},
		traffic.Record{Time: end, Flow: "bulk", Kind: traffic.KindResult, Role: traffic.Receiver, FlowKind: traffic.Saturate,
			Start: t0.Add(time.Millisecond), Completion: f.dur, BytesReceived: uint64(bytes), Jitter: 2 * time.Millisecond})
	return run, recs
}

func fakeResults(runs ...fakeRun) *results.Results {
	res := &results.Results{Records: map[string][]traffic.Record{}}
	for _, f := range runs {
		run, recs := f.build()
		res.Runs = append(res.Runs, run)
		res.Records[run.ID] = recs
	}
	return res
}

func constant(r float64) func(float64) float64 { return func(float64) float64 { return r } }

// parseClaims decodes and validates claims as a scenario's claims: key.
func parseClaims(t *testing.T, text string, dims Dimensions) []Claim {
	t.Helper()
	var list []Claim
	if err := config.Decode([]byte(text), &list); err != nil {
		t.Fatal(err)
	}
	if errs := Validate("claims", list, dims, []string{"bulk"}); len(errs) > 0 {
		t.Fatal(errs)
	}
	return list
}

var pmDims = Dimensions{"pm": {"a", "b", "c"}, "cc": {"cubic", "amp_olia"}}

// TestEvaluateRatio: a's goodput (10 Mbit/s) over b's (5) is 2: PASS in
// [1.8, 2.2], FAIL in [1, 1.5]; three runs against three, however far
// apart, give a Mann-Whitney p of 0.1 at best, which shows no difference
// at 5 %; the interval holds the value and summary.json carries all of
// it.
func TestEvaluateRatio(t *testing.T) {
	var runs []fakeRun
	for i, rate := range []float64{9.8, 10, 10.2} {
		runs = append(runs,
			fakeRun{id: "a" + string(rune('1'+i)), variant: results.Variant{"pm": "a", "cc": "cubic"}, dur: 3 * time.Second, rate: constant(rate), rtts: []time.Duration{20 * time.Millisecond}},
			fakeRun{id: "b" + string(rune('1'+i)), variant: results.Variant{"pm": "b", "cc": "cubic"}, dur: 3 * time.Second, rate: constant(rate / 2), rtts: []time.Duration{20 * time.Millisecond}})
	}
	list := parseClaims(t, `
- {id: x-pass, figure: Fig. 1, metric: goodput, of: {pm: a}, over: {pm: b}, range: [1.8, 2.2]}
- {id: x-fail, figure: Fig. 1, metric: goodput, of: {pm: a}, over: {pm: b}, range: [1, 1.5]}
- {id: x-same, figure: Fig. 1, metric: goodput, of: {pm: a}, over: {pm: b}, range: [1.8, 2.2], mann-whitney: [0.05, null]}
- {id: x-apart, figure: Fig. 1, metric: goodput, of: {pm: a}, over: {pm: b}, range: [1.8, 2.2], mann-whitney: [null, 0.05]}
- {id: x-diff, figure: Fig. 1, metric: goodput, of: {pm: a}, over: {pm: b}, compare: difference, range: [4, 6]}
`, pmDims)
	rs := Evaluate(fakeResults(runs...), list)
	want := []Verdict{Pass, Fail, Pass, Fail, Pass}
	for i, r := range rs {
		if r.Verdict != want[i] {
			t.Errorf("%s: %s (%s), want %s", r.ID, r.Verdict, r.Reason, want[i])
		}
	}
	r := rs[0]
	if r.Value == nil || !near(*r.Value, 2, 0.01) || r.Low == nil || *r.Low > 2 || *r.High < 2 || r.N != 3 || r.NOver != 3 || r.Unit != "ratio" {
		t.Errorf("ratio %+v: want 2 inside its interval, 3 samples each", r)
	}
	if rs[2].P == nil || !near(*rs[2].P, 0.1, 1e-9) {
		t.Errorf("Mann-Whitney p %v: want 0.1, the smallest 3 against 3 can give", rs[2].P)
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(rs[0]); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"verdict":"PASS"`, `"range":[1.8,2.2]`, `"ci_low":`, `"figure":"Fig. 1"`} {
		if !strings.Contains(js.String(), key) {
			t.Errorf("JSON %s: no %s", js.String(), key)
		}
	}
}

// TestEvaluateNotRun: a claim on a variant whose runs were skipped says
// why; one whose runs all failed says so; a bad comparison never runs.
func TestEvaluateNotRun(t *testing.T) {
	res := fakeResults(
		fakeRun{id: "1", variant: results.Variant{"pm": "a", "cc": "amp_olia"}, skipped: "congestion control amp_olia is not available"},
		fakeRun{id: "2", variant: results.Variant{"pm": "a", "cc": "cubic"}, dur: time.Second, rate: constant(5), rtts: []time.Duration{time.Millisecond}},
		fakeRun{id: "3", variant: results.Variant{"pm": "b", "cc": "cubic"}, errText: "up: no"},
	)
	list := parseClaims(t, `
- {id: olia, figure: Fig. 8, metric: goodput, of: {cc: amp_olia}, over: {cc: cubic}, range: [0.1, 0.4]}
- {id: failed, figure: Fig. 8, metric: goodput, of: {pm: a}, over: {pm: b}, range: [0.1, 0.4]}
- {id: nothing, figure: Fig. 8, metric: goodput, of: {pm: c}, range: [0.1, 0.4]}
`, pmDims)
	rs := Evaluate(res, list)
	for i, want := range []string{"congestion control amp_olia is not available", "the 1 runs of pm=b failed", "no run of pm=c"} {
		if rs[i].Verdict != NotRun || !strings.Contains(rs[i].Reason, want) || rs[i].Value != nil {
			t.Errorf("%s: %s %q, want NOT RUN: %s", rs[i].ID, rs[i].Verdict, rs[i].Reason, want)
		}
	}
	var out bytes.Buffer
	if err := WriteTable(&out, rs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Claims: 0 passed, 0 failed, 3 not run", "  olia     NOT RUN  -", "not run: congestion control amp_olia is not available"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table:\n%s\nno %q", out.String(), want)
		}
	}
}

// failureRun is a flow of 8 Mbit/s whose link set fails from 4 s to 8 s:
// nothing for the first 0.5 s of it, then 4 Mbit/s (the path left), and
// 8 again from 8 s; of its two subflows the second carries nothing
// while the failure lasts and until 8.3 s.
func failureRun(id string) fakeRun {
	return fakeRun{id: id, variant: results.Variant{"pm": "a"}, dur: 16 * time.Second,
		rate: func(s float64) float64 {
			switch {
			case s > 4 && s <= 4.5:
				return 0
			case s > 4.5 && s <= 8:
				return 4
			}
			return 8
		},
		acking: func(sub int, s float64) bool { return sub == 0 || s <= 4 || s > 8.3 },
		rtts:   []time.Duration{20 * time.Millisecond, 60 * time.Millisecond},
		events: []results.Event{
			{At: 4 * time.Second, AppliedAfter: 4 * time.Second, Link: "l1", Action: "down"},
			{At: 8 * time.Second, AppliedAfter: 8 * time.Second, Link: "l1", Action: "up"},
		}}
}

// TestEvaluateFailureMetrics measures a failure: goodput before 8,
// during (4 to 8 s) 3.5, after (13 to 16 s) 8; recovery 1, the failure
// ratio 3.5/8; the reaction 0.5 s; the repair 0.3 s; and the subflows'
// metrics.
func TestEvaluateFailureMetrics(t *testing.T) {
	res := fakeResults(failureRun("1"), failureRun("2"))
	list := parseClaims(t, `
- {id: before, figure: Fig. 6, metric: goodput, window: before, range: [7.9, 8.1]}
- {id: during, figure: Fig. 6, metric: goodput, window: during, range: [3.4, 3.6]}
- {id: after, figure: Fig. 6, metric: goodput, window: after, range: [7.9, 8.1]}
- {id: span, figure: Fig. 6, metric: goodput, window: 5s-8s, range: [3.9, 4.1]}
- {id: recovery, figure: Fig. 6, metric: recovery, range: [0.99, 1.01]}
- {id: ratio, figure: Fig. 6, metric: failure-ratio, range: [0.43, 0.45]}
- {id: reaction, figure: Fig. 6, metric: reaction, range: [0.45, 0.55]}
- {id: repair, figure: Fig. 6, metric: repair, range: [0.25, 0.4]}
- {id: spread, figure: Fig. 6, metric: rtt-spread, range: [39.9, 40.1]}
- {id: high, figure: Fig. 9, metric: high-rtt-share, range: [0.5, 0.6]}
- {id: rtos, figure: Fig. 4, metric: rtos, compare: share, where: [1, null], range: [1, 1]}
- {id: subflows, figure: Fig. 4, metric: subflows, range: [2, 2]}
- {id: jitter, figure: Fig. 8, metric: jitter, range: [2, 2]}
- {id: loss, figure: Fig. 5, metric: loss, range: [0, 0.01]}
`, Dimensions{"pm": {"a"}})
	for _, r := range Evaluate(res, list) {
		if r.Verdict != Pass {
			t.Errorf("%s: %s, value %s (%s), want %v", r.ID, r.Verdict, r.ValueText(), r.Reason, r.Range)
		}
	}
}

// TestEvaluateSpreadAndSpearman: goodput over three values of a
// dimension spreads by their largest mean over the smallest; goodput
// falls as the subflows' RTTs spread, so rho is -1.
func TestEvaluateSpreadAndSpearman(t *testing.T) {
	var runs []fakeRun
	for i, path := range []string{"a", "b", "c"} {
		for rep := range 2 {
			runs = append(runs, fakeRun{id: path + string(rune('0'+rep)), variant: results.Variant{"pm": path},
				dur: 2 * time.Second, rate: constant(10 + float64(i) + 0.1*float64(rep)),
				rtts: []time.Duration{10 * time.Millisecond, time.Duration(100-30*i-rep) * time.Millisecond}})
		}
	}
	list := parseClaims(t, `
- {id: spread, figure: Fig. 4, metric: goodput, compare: spread, across: pm, range: [null, 1.25]}
- {id: rho, figure: Fig. 6, metric: goodput, compare: spearman, with: rtt-spread, range: [null, -0.5]}
`, Dimensions{"pm": {"a", "b", "c"}})
	rs := Evaluate(fakeResults(runs...), list)
	if r := rs[0]; r.Verdict != Pass || !near(*r.Value, 12.05/10.05, 0.001) || r.N != 3 {
		t.Errorf("spread %+v, want 12.05/10.05 over 3 values", r)
	}
	if r := rs[1]; r.Verdict != Pass || !near(*r.Value, -1, 1e-9) || r.N != 6 {
		t.Errorf("rho %s over %d flows, want -1 over 6", r.ValueText(), r.N)
	}
}

// TestValidateNamesTheField: every problem of a claim names its path.
func TestValidateNamesTheField(t *testing.T) {
	var list []Claim
	text := `
- {id: a, metric: speed, of: {pm: z}, range: [2, 1]}
- {id: a, figure: F, metric: goodput, over: {mode: x}, compare: spread, range: [1, 2], window: during}
- {id: c, figure: F, metric: completion, flow: nope, window: before, range: [null, null]}
`
	if err := yaml.Unmarshal([]byte(text), &list); err != nil {
		t.Fatal(err)
	}
	errs := Validate("claims", list, Dimensions{"pm": {"a"}}, []string{"bulk"})
	got := errs.Error()
	for _, want := range []string{
		"claims[0].figure: missing", `claims[0].metric: "speed" is not one of`, `claims[0].of.pm: "z" is not one of its values (a)`,
		"claims[0].range: [2, 1] is empty", `claims[1].id: "a" is another claim's`, "claims[1].over.mode: not a dimension",
		"claims[1].over: a spread has no reference", "claims[1].across: a spread, and only a spread",
		`claims[2].flow: "nope" names no flow`, "claims[2].window: completion is measured over the whole flow",
		"claims[2].range: missing",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors:\n%s\nno %q", got, want)
		}
	}
}

// TestEvaluateEach: a claim per value of a dimension, which all, any or
// a share of them must pass: a's goodput over b's is 2 at x, 1 at y, 3
// at z; in [1.5, null] at 2 of 3.
func TestEvaluateEach(t *testing.T) {
	var runs []fakeRun
	for _, v := range []struct {
		at    string
		ratio float64
	}{{"x", 2}, {"y", 1}, {"z", 3}} {
		for rep := range 2 {
			id := v.at + string(rune('0'+rep))
			runs = append(runs,
				fakeRun{id: "a" + id, variant: results.Variant{"pm": "a", "cc": v.at}, dur: 2 * time.Second, rate: constant(5 * v.ratio), rtts: []time.Duration{time.Millisecond}},
				fakeRun{id: "b" + id, variant: results.Variant{"pm": "b", "cc": v.at}, dur: 2 * time.Second, rate: constant(5), rtts: []time.Duration{time.Millisecond}})
		}
	}
	list := parseClaims(t, `
- {id: all, figure: F, metric: goodput, of: {pm: a}, over: {pm: b}, each: cc, range: [1.5, null]}
- {id: any, figure: F, metric: goodput, of: {pm: a}, over: {pm: b}, each: cc, holds: any, range: [1.5, null]}
- {id: third, figure: F, metric: goodput, of: {pm: a}, over: {pm: b}, each: cc, holds: 2/3, range: [1.5, null]}
`, Dimensions{"pm": {"a", "b"}, "cc": {"x", "y", "z"}})
	rs := Evaluate(fakeResults(runs...), list)
	for i, want := range []Verdict{Fail, Pass, Pass} {
		if rs[i].Verdict != want || rs[i].Value == nil || !near(*rs[i].Value, 2.0/3, 1e-9) {
			t.Errorf("%s: %s %s (%s), want %s at 2/3", rs[i].ID, rs[i].Verdict, rs[i].ValueText(), rs[i].Reason, want)
		}
	}
	if r := rs[0].Reason; !strings.Contains(r, "2 of 3 values of cc passed") || !strings.Contains(r, "y 1.00 FAIL") {
		t.Errorf("reason %q", r)
	}
	var list2 []Claim
	if err := yaml.Unmarshal([]byte(`[{id: h, figure: F, metric: goodput, each: cc, holds: most, range: [1, 2]}]`), &list2); err != nil {
		t.Fatal(err)
	}
	if errs := Validate("claims", list2, Dimensions{"cc": {"x"}}, nil); !strings.Contains(errs.Error(), `claims[0].holds: "most" is all, any or a share`) {
		t.Errorf("errors %v", errs)
	}
}
