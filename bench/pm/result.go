package pm

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The repair targets: with `amptcp pm`, every subflow of the connection
// carries data again within TargetRepair of the path's return, in 95 % of
// the repetitions and in every one; and sooner than with the kernel's path
// manager alone, compared by the medians of the same run.
const TargetRepair = time.Second

// Result is what `amptcp bench pm` measured; its JSON is the --json
// output.
type Result struct {
	Repetitions    int       `json:"repetitions"`
	OutageSeconds  float64   `json:"outage_seconds"`
	TimeoutSeconds float64   `json:"timeout_seconds"`
	RateMbps       float64   `json:"rate_mbps"` // of each path
	Variants       []Variant `json:"variants"`
	Failures       []Failure `json:"failures"`
	// Samples are every repetition's, in the order they were taken.
	Samples     []Sample    `json:"samples"`
	Summaries   []Summary   `json:"summaries"`
	Targets     []Target    `json:"targets"`
	Environment Environment `json:"environment"`
}

// Sample is one repetition of a variant and a failure.
type Sample struct {
	Variant    string `json:"variant"`
	Failure    string `json:"failure"`
	Repetition int    `json:"repetition"`
	// Recovered says whether every subflow carried data again within the
	// timeout, RepairMS how long after the path's return.
	Recovered bool    `json:"recovered"`
	RepairMS  float64 `json:"repair_ms,omitempty"`
	// Error says why a repetition was not measured (the connection
	// never had its two subflows carrying data, say); such a repetition
	// counts in no statistic.
	Error string `json:"error,omitempty"`
}

// Summary is a variant's repairs after one kind of failure. A repetition
// that did not recover counts as the timeout in the quantiles.
type Summary struct {
	Variant   string  `json:"variant"`
	Failure   string  `json:"failure"`
	Measured  int     `json:"measured"`
	Recovered int     `json:"recovered"`
	MedianMS  float64 `json:"median_ms"`
	P95MS     float64 `json:"p95_ms"`
	MaxMS     float64 `json:"max_ms"`
}

// Target is a performance target judged on the summaries.
type Target struct {
	Failure  string `json:"failure"`
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// Environment says where the numbers come from.
type Environment struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	Kernel  string `json:"kernel"`
	CPUs    int    `json:"cpus"`
	Prefix  string `json:"prefix"`
}

// summarize computes the summaries of every failure and variant that has
// samples, in the order of o's failures and variants.
func summarize(samples []Sample, o Options) []Summary {
	var out []Summary
	for _, f := range o.Failures {
		for _, v := range o.Variants {
			s := Summary{Variant: v, Failure: f}
			var ms []float64
			for _, x := range samples {
				if x.Variant != v || x.Failure != f || x.Error != "" {
					continue
				}
				s.Measured++
				if x.Recovered {
					s.Recovered++
					ms = append(ms, x.RepairMS)
				} else {
					ms = append(ms, float64(o.Timeout.Milliseconds()))
				}
			}
			if s.Measured == 0 {
				continue
			}
			s.MedianMS, s.P95MS, s.MaxMS = quantile(ms, 0.5), quantile(ms, 0.95), slices.Max(ms)
			out = append(out, s)
		}
	}
	return out
}

// quantile is the nearest-rank q-quantile of v: with fewer than 20
// values, the p95 is the largest.
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// judge sets the targets of every failure the summaries cover.
func judge(sums []Summary, o Options) []Target {
	find := func(v, f string) *Summary {
		for i := range sums {
			if sums[i].Variant == v && sums[i].Failure == f {
				return &sums[i]
			}
		}
		return nil
	}
	var out []Target
	for _, f := range o.Failures {
		pm := find(VariantAMPTCP, f)
		if pm == nil {
			continue
		}
		out = append(out, Target{
			Failure:  f,
			Name:     "amptcp pm repairs",
			Want:     "p95 ≤ " + msText(float64(TargetRepair.Milliseconds())) + ", every one",
			Measured: fmt.Sprintf("p95 %s, %d of %d", msText(pm.P95MS), pm.Recovered, pm.Measured),
			Met:      pm.P95MS <= float64(TargetRepair.Milliseconds()) && pm.Recovered == pm.Measured,
		})
		if k := find(VariantKernel, f); k != nil {
			out = append(out, Target{
				Failure:  f,
				Name:     "sooner than the kernel alone",
				Want:     "median below the kernel's",
				Measured: fmt.Sprintf("%s vs %s", msText(pm.MedianMS), msText(k.MedianMS)),
				Met:      pm.MedianMS < k.MedianMS,
			})
		}
	}
	return out
}

// msText writes milliseconds for people: 12.3 ms, 1.24 s.
func msText(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	default:
		return fmt.Sprintf("%.1f ms", ms)
	}
}
