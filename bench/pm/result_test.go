package pm

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	if q := quantile(v, 0.5); q != 3 {
		t.Errorf("median %v", q)
	}
	if q := quantile(v, 0.95); q != 5 {
		t.Errorf("p95 of 5 values %v, want the largest", q)
	}
	var many []float64
	for i := range 100 {
		many = append(many, float64(100-i))
	}
	if q := quantile(many, 0.95); q != 95 {
		t.Errorf("p95 of 1..100 %v", q)
	}
	if !slices.Equal(v, []float64{5, 1, 4, 2, 3}) {
		t.Errorf("quantile sorted its argument: %v", v)
	}
}

// samples is a run of 3 repetitions: amptcp pm repairs in tens of
// milliseconds after a link failure and misses one blackhole repair; the
// kernel takes seconds; one repetition was not measured.
func samples() ([]Sample, Options) {
	o := Options{Repetitions: 3, Timeout: 15 * time.Second}
	o.Validate()
	var s []Sample
	add := func(v, f string, rep int, ms float64, ok bool, err string) {
		s = append(s, Sample{Variant: v, Failure: f, Repetition: rep, RepairMS: ms, Recovered: ok, Error: err})
	}
	for rep, ms := range []float64{12, 40, 9} {
		add(VariantAMPTCP, FailureLink, rep+1, ms, true, "")
		add(VariantKernel, FailureLink, rep+1, 1000+ms, true, "")
	}
	add(VariantAMPTCP, FailureBlackhole, 1, 400, true, "")
	add(VariantAMPTCP, FailureBlackhole, 2, 0, false, "")
	add(VariantAMPTCP, FailureBlackhole, 3, 0, false, "before the failure: no two subflows")
	add(VariantKernel, FailureBlackhole, 1, 1200, true, "")
	add(VariantKernel, FailureBlackhole, 2, 1300, true, "")
	return s, o
}

func TestSummarizeAndJudge(t *testing.T) {
	s, o := samples()
	sums := summarize(s, o)
	want := []Summary{
		{VariantAMPTCP, FailureLink, 3, 3, 12, 40, 40},
		{VariantKernel, FailureLink, 3, 3, 1012, 1040, 1040},
		// The unmeasured repetition counts in nothing, the one that did
		// not recover as the timeout.
		{VariantAMPTCP, FailureBlackhole, 2, 1, 400, 15000, 15000},
		{VariantKernel, FailureBlackhole, 2, 2, 1200, 1300, 1300},
	}
	if !slices.Equal(sums, want) {
		t.Fatalf("summaries\n%+v\nwant\n%+v", sums, want)
	}
	targets := judge(sums, o)
	var got []string
	for _, tg := range targets {
		got = append(got, tg.Failure+" "+tg.Name+": "+tg.Measured+" "+map[bool]string{true: "MET", false: "MISSED"}[tg.Met])
	}
	wantT := []string{
		"link amptcp pm repairs: p95 40.0 ms, 3 of 3 MET",
		"link sooner than the kernel alone: 12.0 ms vs 1.01 s MET",
		"blackhole amptcp pm repairs: p95 15.00 s, 1 of 2 MISSED",
		"blackhole sooner than the kernel alone: 400 ms vs 1.20 s MET",
	}
	if !slices.Equal(got, wantT) {
		t.Errorf("targets\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantT, "\n"))
	}

	// Without the kernel's runs, there is nothing to compare with.
	o.Variants = []string{VariantAMPTCP}
	if targets := judge(summarize(s, o), o); len(targets) != 2 || targets[1].Name != "amptcp pm repairs" {
		t.Errorf("targets without the kernel: %+v", targets)
	}
}

func TestWriteText(t *testing.T) {
	s, o := samples()
	r := &Result{Repetitions: 3, OutageSeconds: 2, TimeoutSeconds: 15, RateMbps: RateMbps, Samples: s,
		Variants:    []Variant{variantByName(VariantAMPTCP), variantByName(VariantKernel)},
		Failures:    []Failure{failureByName(FailureLink), failureByName(FailureBlackhole)},
		Environment: Environment{Version: "amptcp test", Go: "go1", Kernel: "6.18", CPUs: 2}}
	r.Summaries = summarize(s, o)
	r.Targets = judge(r.Summaries, o)
	var b strings.Builder
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"over two paths of 100 Mbit/s, the second failed for 2s; 3 repetitions, taken in turns",
		"failure    variant       median       p95       max  recovered\n",
		"link       amptcp-pm    12.0 ms   40.0 ms   40.0 ms  3 of 3\n",
		"           kernel        1.01 s    1.04 s    1.04 s  3 of 3\n",
		"blackhole  amptcp-pm     400 ms   15.00 s   15.00 s  1 of 2\n",
		"  blackhole  amptcp pm repairs:            p95 ≤ 1.00 s, every one    p95 15.00 s, 1 of 2    MISSED\n",
		"  link       sooner than the kernel alone: median below the kernel's  12.0 ms vs 1.01 s      MET\n",
		"repetitions not measured:\n  blackhole, amptcp-pm, repetition 3: before the failure: no two subflows\n",
		"  blackhole  the router drops what the server sends",
		"  kernel     the kernel's in-kernel path manager",
		"amptcp test, go1, Linux 6.18, 2 CPUs\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
