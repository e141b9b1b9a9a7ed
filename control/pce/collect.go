package pce

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/amptcp/amptcp/te"
)

// Row is what a router says of one locator it probes: whether it is up,
// its smoothed RTT and its least RTT of the last half minute (0 until it
// answered).
type Row struct {
	Addr   netip.Addr
	Up     bool
	RTT    time.Duration
	MinRTT time.Duration
}

// weight is what the graph weighs a link by: its least recent RTT, which
// the queues of the traffic on it do not inflate, else its smoothed RTT.
func (r Row) weight() time.Duration { return cmp.Or(r.MinRTT, r.RTT) }

// The metrics a lispd exports for each probed locator (package metrics).
const (
	metricUp     = "lispd_locator_up"
	metricRTT    = "lispd_locator_rtt_seconds"
	metricMinRTT = "lispd_locator_min_rtt_seconds"
)

// maxMetrics bounds what is read of one node's metrics.
const maxMetrics = 8 << 20

// Scrape reads a lispd's row of the RTT matrix from its metrics: the
// RLOC-probing gauges lispd_locator_up and lispd_locator_rtt_seconds, by
// locator. Metrics are read over HTTP in Prometheus's text format, as any
// monitoring reads them: no more configuration on the routers, and the
// same numbers an operator sees.
func Scrape(ctx context.Context, client *http.Client, url string) ([]Row, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return ParseRows(io.LimitReader(resp.Body, maxMetrics))
}

// ParseRows reads the probing gauges out of metrics in the text format.
func ParseRows(r io.Reader) ([]Row, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	rows := map[netip.Addr]*Row{}
	var order []netip.Addr
	each := func(name string, f func(*Row, float64)) {
		fam := families[name]
		if fam == nil {
			return
		}
		for _, m := range fam.GetMetric() {
			a, ok := locatorOf(m)
			if !ok || m.GetGauge() == nil {
				continue
			}
			row := rows[a]
			if row == nil {
				row = &Row{Addr: a}
				rows[a] = row
				order = append(order, a)
			}
			f(row, m.GetGauge().GetValue())
		}
	}
	each(metricUp, func(r *Row, v float64) { r.Up = v == 1 })
	seconds := func(d *time.Duration, v float64) {
		if v > 0 && v < 3600 {
			*d = time.Duration(v * float64(time.Second))
		}
	}
	each(metricRTT, func(r *Row, v float64) { seconds(&r.RTT, v) })
	each(metricMinRTT, func(r *Row, v float64) { seconds(&r.MinRTT, v) })
	out := make([]Row, len(order))
	for i, a := range order {
		out[i] = *rows[a]
	}
	return out, nil
}

func locatorOf(m *dto.Metric) (netip.Addr, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == "locator" {
			a, err := netip.ParseAddr(l.GetValue())
			return a.Unmap(), err == nil
		}
	}
	return netip.Addr{}, false
}

// maxScrapes bounds the reads in flight at once.
const maxScrapes = 32

// staleAfter is how many reads of a node may fail in a row before its
// row is dropped: a lost read is no failed router.
const staleAfter = 2

// scrape reads every node's row, maxScrapes at a time.
func (e *Engine) scrape(ctx context.Context) {
	type job struct {
		name, url string
	}
	e.mu.Lock()
	var jobs []job
	for name, n := range e.nodes {
		if n.metrics != "" {
			jobs = append(jobs, job{name, n.metrics})
		}
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxScrapes)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rows, err := e.fetch(ctx, j.url)
			now := e.now()
			e.mu.Lock()
			defer e.mu.Unlock()
			n := e.nodes[j.name]
			if n == nil {
				return
			}
			if err != nil {
				n.failures++
				n.err = err.Error()
				if n.failures >= staleAfter {
					n.rows = nil
				}
				e.counter.scrapeErrors.Add(1)
				e.log.Debug("cannot read a node's RTTs", "node", j.name, "url", j.url, "error", err)
				return
			}
			n.failures, n.err, n.read = 0, "", now
			n.rows = make(map[netip.Addr]Row, len(rows))
			for _, r := range rows {
				n.rows[r.Addr] = r
			}
			e.counter.scrapes.Add(1)
		})
	}
	wg.Wait()
}

// snapshot is the overlay as a graph, with what it was built from: the
// node of each vertex and the address of the head each edge's tail
// probes, which is the ELP hop. It is read-only once built.
type snapshot struct {
	g     *te.Graph
	nodes []string         // vertex -> node name
	index map[string]int32 // node name -> vertex
	hop   []netip.Addr     // edge -> the address probed
	built time.Time
	pool  sync.Pool // *te.Searcher of g
}

// build makes the graph of the nodes' rows: an edge u→v for each locator
// of v that u probes and finds up, weighted by its least recent RTT (the
// lightest of several), every xTR a node no path goes through. The caller holds the
// lock.
func (e *Engine) build(now time.Time) *snapshot {
	s := &snapshot{index: map[string]int32{}, built: now}
	for name := range e.nodes {
		s.nodes = append(s.nodes, name)
	}
	slices.Sort(s.nodes)
	for i, name := range s.nodes {
		s.index[name] = int32(i)
	}
	b := te.NewBuilder(len(s.nodes))
	type edge struct {
		w   float64
		hop netip.Addr
	}
	edges := map[[2]int32]edge{}
	for i, name := range s.nodes {
		n := e.nodes[name]
		b.SetTransit(i, n.transit())
		for a, r := range n.rows {
			v := e.byAddr[a]
			if v == nil || v == n || !r.Up || r.weight() <= 0 {
				continue
			}
			k := [2]int32{int32(i), s.index[v.name]}
			w := r.weight().Seconds()
			if old, ok := edges[k]; !ok || w < old.w || (w == old.w && a.Less(old.hop)) {
				edges[k] = edge{w, a}
			}
		}
	}
	for k, ed := range edges {
		b.Add(int(k[0]), int(k[1]), ed.w) // valid nodes and weights
	}
	s.g = b.Build()
	s.hop = make([]netip.Addr, s.g.Edges())
	for k, ed := range edges {
		if i, ok := s.g.Find(int(k[0]), int(k[1])); ok {
			s.hop[i] = ed.hop
		}
	}
	s.pool.New = func() any { return te.NewSearcher(s.g) }
	return s
}

// edge is the edge from node u to node v, if the graph has one.
func (s *snapshot) edge(u, v string) (int, bool) {
	iu, ok1 := s.index[u]
	iv, ok2 := s.index[v]
	if !ok1 || !ok2 {
		return 0, false
	}
	return s.g.Find(int(iu), int(iv))
}
