package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// Plot is one plot written as a PNG file.
type Plot struct {
	// File is the file's name in the report's directory.
	File  string `json:"file"`
	Title string `json:"title"`
}

// plotWidth and plotHeight are the size of every plot.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 4 * vg.Inch
)

// WritePlots draws the plots of an experiment into dir as PNG files and
// returns them in the order the report shows them: the throughput of
// each subflow over time, with the timeline's events as vertical lines,
// for the first successful run of each variant; for each transfer size
// the CDF of completion times per variant; for each metric the medians
// per variant as bars with their confidence intervals as whiskers; and
// each run's goodput against its subflows' RTT spread.
func WritePlots(dir string, res *Results, s *Summary) ([]Plot, error) {
	var plots []Plot
	save := func(p *plot.Plot, file string) error {
		if err := p.Save(plotWidth, plotHeight, filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("report: plot %s: %w", file, err)
		}
		plots = append(plots, Plot{File: file, Title: p.Title.Text})
		return nil
	}
	for _, v := range s.Variants {
		for _, run := range res.Runs {
			if run.Variant.Name() != v.Name || run.Error != "" {
				continue
			}
			p, ok, err := throughputPlot(run, res)
			if err != nil {
				return plots, err
			}
			if !ok {
				continue
			}
			if err := save(p, "throughput-"+fileName(run.ID)+".png"); err != nil {
				return plots, err
			}
			if p, ok, err = sequencePlot(run, res); err != nil {
				return plots, err
			}
			if ok {
				if err := save(p, "sequence-"+fileName(run.ID)+".png"); err != nil {
					return plots, err
				}
			}
			if p, ok, err = linksPlot(run, res.Links[run.ID]); err != nil {
				return plots, err
			}
			if ok {
				if err := save(p, "links-"+fileName(run.ID)+".png"); err != nil {
					return plots, err
				}
			}
			break
		}
	}
	for _, m := range s.Metrics {
		if !strings.HasPrefix(m.Name, "completion") {
			continue
		}
		p, err := cdfPlot(m)
		if err != nil {
			return plots, err
		}
		if err := save(p, "cdf-"+fileName(m.Name)+".png"); err != nil {
			return plots, err
		}
	}
	for _, m := range s.Metrics {
		p, err := barPlot(m)
		if err != nil {
			return plots, err
		}
		if err := save(p, "bars-"+fileName(m.Name)+".png"); err != nil {
			return plots, err
		}
	}
	p, ok, err := rttSpreadPlot(res, s)
	if err != nil {
		return plots, err
	}
	if ok {
		if err := save(p, "goodput-vs-rtt-spread.png"); err != nil {
			return plots, err
		}
	}
	return plots, nil
}

// throughputPlot draws a run's subflows' throughput over time; ok is
// false when the run has no subflow samples.
func throughputPlot(run *Run, res *Results) (*plot.Plot, bool, error) {
	series := results.Subflows(res.Records[run.ID])
	origin := run.Origin()
	if origin.IsZero() {
		for _, s := range series {
			if t := s.Samples[0].Time; origin.IsZero() || t.Before(origin) {
				origin = t
			}
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput per subflow, run %s (%s)", run.ID, run.Variant.Name())
	p.X.Label.Text = "time since the run's start (s)"
	p.Y.Label.Text = "Mbit/s acknowledged"
	p.Legend.Top = true
	top, drawn := 0.0, 0
	for _, s := range series {
		xs, ys := s.Throughput(origin)
		if len(xs) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(xs))
		for i := range xs {
			pts[i] = plotter.XY{X: xs[i], Y: ys[i] / 1e6}
			top = max(top, ys[i]/1e6)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, false, fmt.Errorf("report: throughput of %s: %w", s.Key.Flow, err)
		}
		l.Color = plotutil.Color(drawn)
		label := fmt.Sprintf("%s sf%d", s.Key.Flow, s.Key.Subflow)
		if s.Local != "" {
			label += " " + s.Local + "→" + s.Remote
		}
		p.Add(l)
		p.Legend.Add(label, l)
		drawn++
	}
	if drawn == 0 {
		return nil, false, nil
	}
	if err := addEvents(p, run, origin, top); err != nil {
		return nil, false, err
	}
	// Room above the lines for the legend.
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top*1.25
	return p, true, nil
}

// sequencePlot draws a run's data sequence: each flow's bytes at its
// receiver over time, in order (a stall is a flat stretch, the burst
// that fills a hole a step), and each subflow's acknowledged bytes,
// dashed ([MPTCP-failures] Fig. 8); ok is false when the run has no
// receiver samples.
func sequencePlot(run *Run, res *Results) (*plot.Plot, bool, error) {
	recs := res.Records[run.ID]
	origin := run.Origin()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Data sequence, run %s (%s)", run.ID, run.Variant.Name())
	p.X.Label.Text = "time since the run's start (s)"
	p.Y.Label.Text = "MB in order at the receiver (subflows: acknowledged, dashed)"
	p.Legend.Top = true
	flows := map[string]plotter.XYs{}
	var order []string
	top := 0.0
	for _, r := range recs {
		if r.Kind != traffic.KindReceiver || r.Datagrams > 0 {
			continue
		}
		if _, ok := flows[r.Flow]; !ok {
			order = append(order, r.Flow)
		}
		mb := float64(r.BytesReceived) / 1e6
		flows[r.Flow] = append(flows[r.Flow], plotter.XY{X: r.Time.Sub(origin).Seconds(), Y: mb})
		top = max(top, mb)
	}
	if len(order) == 0 {
		return nil, false, nil
	}
	drawn := 0
	for _, f := range order {
		l, err := plotter.NewLine(flows[f])
		if err != nil {
			return nil, false, fmt.Errorf("report: sequence of %s: %w", f, err)
		}
		l.Color, l.Width = plotutil.Color(drawn), vg.Points(2)
		p.Add(l)
		p.Legend.Add(f, l)
		drawn++
	}
	for _, sf := range results.Subflows(recs) {
		if sf.Key.Subflow == 0 {
			continue // a TCP flow: its one "subflow" is the flow
		}
		pts := make(plotter.XYs, len(sf.Samples))
		for i, r := range sf.Samples {
			pts[i] = plotter.XY{X: r.Time.Sub(origin).Seconds(), Y: float64(r.BytesAcked) / 1e6}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, false, fmt.Errorf("report: sequence of %s sf%d: %w", sf.Key.Flow, sf.Key.Subflow, err)
		}
		l.Color, l.Dashes = plotutil.Color(drawn), plotutil.Dashes(1)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s sf%d", sf.Key.Flow, sf.Key.Subflow), l)
		drawn++
	}
	if err := addEvents(p, run, origin, top); err != nil {
		return nil, false, err
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top*1.25
	return p, true, nil
}

// addEvents draws a run's timeline events as dashed vertical lines up to
// a little above top, at the time they were applied.
func addEvents(p *plot.Plot, run *Run, origin time.Time, top float64) error {
	for i, e := range run.Events {
		at, label := e.At.Seconds(), e.Label()
		switch {
		case !e.Applied.IsZero():
			at = e.Applied.Sub(origin).Seconds()
		case e.Error != "":
			label += " (not applied)"
		}
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: top * 1.05}})
		if err != nil {
			return fmt.Errorf("report: event %s: %w", e.Label(), err)
		}
		l.Dashes = plotutil.Dashes(1 + i%3)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s at %.3gs", label, at), l)
	}
	return nil
}

// linksPlot draws the rate each emulated link direction delivered over a
// run, from its 100 ms samples (the tunnels' headers included), with
// the run's events; directions that carried less than a hundredth of
// the busiest are left out. ok is false when the run has no samples.
func linksPlot(run *Run, samples []LinkSample) (*plot.Plot, bool, error) {
	type dir struct {
		name string
		xys  plotter.XYs
		peak float64
	}
	var dirs []*dir
	index := map[string]*dir{}
	prev := map[string]LinkSample{}
	origin := run.Origin()
	for _, ls := range samples {
		name := ls.Link + " " + ls.Direction
		if origin.IsZero() {
			origin = ls.Time
		}
		last, seen := prev[name]
		prev[name] = ls
		if !seen || !ls.Time.After(last.Time) {
			continue
		}
		d := index[name]
		if d == nil {
			d = &dir{name: name}
			index[name] = d
			dirs = append(dirs, d)
		}
		mbps := float64(ls.DeliveredBytes-last.DeliveredBytes) * 8 / ls.Time.Sub(last.Time).Seconds() / 1e6
		d.xys = append(d.xys, plotter.XY{X: ls.Time.Sub(origin).Seconds(), Y: mbps})
		d.peak = max(d.peak, mbps)
	}
	top := 0.0
	for _, d := range dirs {
		top = max(top, d.peak)
	}
	if top == 0 {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Rate delivered per emulated link, run %s (%s)", run.ID, run.Variant.Name())
	p.X.Label.Text = "time since the run's start (s)"
	p.Y.Label.Text = "Mbit/s delivered"
	p.Legend.Top = true
	drawn := 0
	for _, d := range dirs {
		if d.peak < top/100 {
			continue
		}
		l, err := plotter.NewLine(d.xys)
		if err != nil {
			return nil, false, fmt.Errorf("report: rate of %s: %w", d.name, err)
		}
		l.Color = plotutil.Color(drawn)
		p.Add(l)
		p.Legend.Add(d.name, l)
		drawn++
	}
	if err := addEvents(p, run, origin, top); err != nil {
		return nil, false, err
	}
	// Room above the lines for the legend.
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top*1.25
	return p, true, nil
}

// cdfPlot draws the empirical CDF of a metric's samples per variant.
func cdfPlot(m MetricSummary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "CDF of " + m.Name
	p.X.Label.Text = m.Name + " (" + m.Unit + ")"
	p.Y.Label.Text = "fraction of flows"
	p.Legend.Top = true
	p.Legend.Left = false
	p.Y.Min, p.Y.Max = 0, 1
	for i, r := range m.Rows {
		if len(r.samples) == 0 {
			continue
		}
		xs := slices.Sorted(slices.Values(r.samples))
		pts := plotter.XYs{{X: xs[0], Y: 0}}
		for k, x := range xs {
			// A step: up at each sample.
			pts = append(pts, plotter.XY{X: x, Y: float64(k) / float64(len(xs))}, plotter.XY{X: x, Y: float64(k+1) / float64(len(xs))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("report: CDF of %s, %s: %w", m.Name, r.Variant, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(r.Variant, l)
	}
	return p, nil
}

// medianCI is the bars' data: medians, with their confidence intervals as
// errors (zero where there is none).
type medianCI struct {
	plotter.XYs
	plotter.YErrors
}

// barPlot draws a metric's median per variant with its confidence
// interval.
func barPlot(m MetricSummary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = m.Name + ": median and 95% CI per variant"
	p.Y.Label.Text = m.Name + " (" + m.Unit + ")"
	vals := make(plotter.Values, len(m.Rows))
	data := medianCI{XYs: make(plotter.XYs, len(m.Rows)), YErrors: make(plotter.YErrors, len(m.Rows))}
	names := make([]string, len(m.Rows))
	for i, r := range m.Rows {
		names[i] = r.Variant
		vals[i] = r.Median
		data.XYs[i] = plotter.XY{X: float64(i), Y: r.Median}
		if r.CILow != nil {
			data.YErrors[i].Low, data.YErrors[i].High = r.Median-*r.CILow, *r.CIHigh-r.Median
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(min(60, 360/float64(max(1, len(vals))))))
	if err != nil {
		return nil, fmt.Errorf("report: bars of %s: %w", m.Name, err)
	}
	bars.Color = plotutil.Color(0)
	whiskers, err := plotter.NewYErrorBars(data)
	if err != nil {
		return nil, fmt.Errorf("report: whiskers of %s: %w", m.Name, err)
	}
	whiskers.Width = vg.Points(1.5)
	p.Add(bars, whiskers)
	p.NominalX(names...)
	p.Y.Min = 0
	return p, nil
}

// rttSpreadPlot draws each successful run's stream goodput against the
// spread of its subflows' RTTs, a scatter per variant; ok is false when
// no run has both.
func rttSpreadPlot(res *Results, s *Summary) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = "Goodput against differential RTT, per run"
	p.X.Label.Text = "largest minus smallest subflow median RTT (ms)"
	p.Y.Label.Text = "run's stream goodput (Mbit/s)"
	p.Legend.Top = true
	drawn := false
	for i, v := range s.Variants {
		var pts plotter.XYs
		for _, run := range res.Runs {
			if run.Variant.Name() != v.Name || run.Error != "" {
				continue
			}
			recs := res.Records[run.ID]
			spread, ok := results.RTTSpread(results.Subflows(recs))
			g := runGoodput(results.Flows(recs))
			if !ok || g == 0 || math.IsInf(g, 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(spread) / 1e6, Y: g / 1e6})
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, false, fmt.Errorf("report: goodput against RTT spread of %s: %w", v.Name, err)
		}
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(v.Name, sc)
		drawn = true
	}
	p.X.Min, p.Y.Min = 0, 0
	return p, drawn, nil
}

// fileName makes a name usable as a file name: lowercase letters, digits,
// dots and dashes.
func fileName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.'
		if ok {
			b.WriteRune(r)
		} else if !dash {
			b.WriteByte('-')
		}
		dash = !ok
	}
	return strings.Trim(b.String(), "-")
}
