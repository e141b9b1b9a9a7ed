package report

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// Summary is the statistics of an experiment per variant and metric.
type Summary struct {
	Variants []VariantSummary `json:"variants"`
	Metrics  []MetricSummary  `json:"metrics"`
	// Claims are the scenario's claims as the results measure them
	// (lab/claims); ClaimsError says why they could not be read.
	Claims      []claims.Result `json:"claims,omitempty"`
	ClaimsError string          `json:"claims_error,omitempty"`
}

// VariantSummary counts a variant's runs.
type VariantSummary struct {
	Name    string  `json:"name"`
	Variant Variant `json:"variant"`
	Runs    int     `json:"runs"`
	// Failed runs (with an error) are left out of the statistics.
	Failed []string `json:"failed,omitempty"`
	// Flagged runs missed the fidelity tolerances; they are in the
	// statistics (the median resists a few), marked, and counted here.
	Flagged []string `json:"flagged,omitempty"`
	// Skipped runs were not run: the variant needs what the machine
	// lacked (SkipReason).
	Skipped    []string `json:"skipped,omitempty"`
	SkipReason string   `json:"skip_reason,omitempty"`
}

// MetricSummary is one metric over every variant.
type MetricSummary struct {
	// Name says what is measured: "completion 1 MiB", "goodput",
	// "jitter transfer".
	Name string `json:"name"`
	Unit string `json:"unit"`
	// Rows has one row per variant, in the variants' order.
	Rows []Row `json:"rows"`

	order metricOrder
}

// Row is one metric of one variant.
type Row struct {
	Variant string `json:"variant"`
	Stats
	// FailedFlows counts the flows of this metric that ended with an
	// error in runs without one; they are not among the samples.
	FailedFlows int `json:"failed_flows,omitempty"`
	// Flagged counts the samples that come from flagged runs.
	Flagged int `json:"flagged,omitempty"`

	samples []float64
}

// metricOrder sorts metrics: completion times by size, then goodput,
// then jitter by flow kind.
type metricOrder struct {
	group int
	size  uint64
	kind  traffic.Kind
}

// Summarize computes the statistics of every variant and metric: the
// completion time of each transfer size (at the client, in seconds), the
// goodput of saturated flows and, apart, of iperf3 flows (at the
// receiver, Mbit/s), and the in-order delivery jitter of transfers and
// saturated flows (at the receiver, ms). Each flow of a run without an
// error is a sample.
func Summarize(res *Results) *Summary {
	s := &Summary{}
	variants := map[string]int{}
	for _, run := range res.Runs {
		name := run.Variant.Name()
		if _, ok := variants[name]; !ok {
			variants[name] = len(s.Variants)
			s.Variants = append(s.Variants, VariantSummary{Name: name, Variant: run.Variant})
		}
		v := &s.Variants[variants[name]]
		v.Runs++
		if run.Error != "" {
			v.Failed = append(v.Failed, run.ID)
		}
		if run.Flagged() {
			v.Flagged = append(v.Flagged, run.ID)
		}
		if run.Skipped != "" {
			v.Skipped, v.SkipReason = append(v.Skipped, run.ID), run.Skipped
		}
	}
	// A transfer's size is the most bytes any end of it counted in any
	// run, so that a failed transfer still falls under its size.
	sizes := map[string]uint64{}
	for _, run := range res.Runs {
		for _, f := range results.Flows(res.Records[run.ID]) {
			sizes[f.ID] = max(sizes[f.ID], f.Bytes)
		}
	}
	metrics := map[metricOrder]*MetricSummary{}
	row := func(o metricOrder, name, unit, variant string) *Row {
		m := metrics[o]
		if m == nil {
			m = &MetricSummary{Name: name, Unit: unit, order: o}
			for _, v := range s.Variants {
				m.Rows = append(m.Rows, Row{Variant: v.Name})
			}
			metrics[o] = m
		}
		return &m.Rows[variants[variant]]
	}
	add := func(r *Row, x float64, flagged bool) {
		r.samples = append(r.samples, x)
		if flagged {
			r.Flagged++
		}
	}
	for _, run := range res.Runs {
		if run.Error != "" {
			continue
		}
		name := run.Variant.Name()
		for _, f := range results.Flows(res.Records[run.ID]) {
			var r *Row
			switch f.Kind {
			case traffic.Transfer:
				size := sizes[f.ID]
				r = row(metricOrder{group: 0, size: size}, "completion "+byteSize(size), "s", name)
			case traffic.Saturate:
				r = row(metricOrder{group: 1}, "goodput", "Mbit/s", name)
			case traffic.Iperf3:
				// Beside the saturated flows' goodput, which it checks.
				r = row(metricOrder{group: 1, kind: f.Kind}, "goodput iperf3", "Mbit/s", name)
			default:
				continue
			}
			if f.Error != "" {
				r.FailedFlows++
				continue
			}
			if f.Kind == traffic.Transfer {
				add(r, f.Client.Completion.Seconds(), run.Flagged())
			} else {
				add(r, f.Goodput()/1e6, run.Flagged())
			}
			if f.Receiver.Kind != 0 && f.Kind != traffic.Iperf3 { // iperf3 measures no jitter
				j := row(metricOrder{group: 2, kind: f.Kind}, "jitter "+f.Kind.String(), "ms", name)
				add(j, float64(f.Receiver.Jitter)/1e6, run.Flagged())
			}
		}
	}
	for _, m := range metrics {
		for i := range m.Rows {
			m.Rows[i].Stats = Describe(m.Rows[i].samples)
		}
		s.Metrics = append(s.Metrics, *m)
	}
	slices.SortFunc(s.Metrics, func(a, b MetricSummary) int {
		return cmp.Or(cmp.Compare(a.order.group, b.order.group), cmp.Compare(a.order.size, b.order.size),
			cmp.Compare(a.order.kind, b.order.kind))
	})
	list, err := claims.FromScenario([]byte(res.Meta.ScenarioSource))
	if err != nil {
		s.ClaimsError = err.Error()
	} else if len(list) > 0 {
		s.Claims = claims.Evaluate(res, list)
	}
	return s
}

// byteSize writes a size in binary units: 512 B, 256 KiB, 1.75 MiB.
func byteSize(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	num := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	return num + " " + units[u]
}
