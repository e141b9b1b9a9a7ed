package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/amptcp/amptcp/pm"
)

// pmCollector exports the counters of `amptcp pm`, read when Prometheus
// scrapes.
type pmCollector struct {
	counters func() pm.Counters
}

// PM returns a collector of the counters that counters returns (the
// path manager's Counters method).
func PM(counters func() pm.Counters) prometheus.Collector { return pmCollector{counters} }

func pmDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("amptcp_pm_"+name, help, labels, nil)
}

var (
	pmConnections = pmDesc("connections", "MPTCP connections tracked now.")
	pmEvents      = pmDesc("events_total", "mptcp_pm events received, by type.", "type")
	pmMalformed   = pmDesc("events_malformed_total", "mptcp_pm messages that did not decode.")
	pmResyncs     = pmDesc("resyncs_total", "State read again from sock_diag because events were lost.")
	pmPlans       = pmDesc("plans_total", "Plans applied, by policy (default for fallbacks too).", "policy")
	pmPlanSize    = pmDesc("plan_subflows", "Subflows per plan, the first included.")
	pmFallbacks   = pmDesc("fallbacks_total", "Connections that got the default policy because the mapping system did not answer.")
	pmCreated     = pmDesc("subflows_created_total", "Subflows created.")
	pmFailed      = pmDesc("subflow_create_failures_total", "Subflow creates the kernel refused, by errno.", "errno")
	pmPortsInUse  = pmDesc("source_ports_in_use_total", "Source ports tried again because the kernel found them in use.")
	pmBroken      = pmDesc("subflows_broken_total", "Planned subflows lost, by reason.", "reason")
	pmRepaired    = pmDesc("subflows_repaired_total", "Lost subflows established again, by the reason they were lost.", "reason")
	pmDestroyed   = pmDesc("subflows_destroyed_total", "Subflows the path manager closed, by reason.", "reason")
	pmAnnounced   = pmDesc("addresses_announced_total", "Addresses announced to peers.")
	pmAnnounceErr = pmDesc("announce_failures_total", "Announcements the kernel refused.")
	pmLookups     = pmDesc("mapping_lookups_total", "Mapping lookups, by result: answered, negative, failed, cached.", "result")
	pmLookupTime  = pmDesc("mapping_lookup_seconds", "Time the mapping system took to answer, or to be given up on.")
	pmCacheSize   = pmDesc("mapping_cache_entries", "Mappings cached now.")
	pmSetupTime   = pmDesc("setup_seconds", "Time from a connection's ESTABLISHED (or min-bytes) to all its planned subflows established.")
)

// planBuckets are the upper bounds of the plan-size histogram.
var planBuckets = []float64{1, 2, 3, 4, 6, 8, 16, 32}

func (pmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pmConnections, pmEvents, pmMalformed, pmResyncs, pmPlans, pmPlanSize,
		pmFallbacks, pmCreated, pmFailed, pmPortsInUse, pmBroken, pmRepaired, pmDestroyed, pmAnnounced,
		pmAnnounceErr, pmLookups, pmLookupTime, pmCacheSize, pmSetupTime} {
		ch <- d
	}
}

func (p pmCollector) Collect(ch chan<- prometheus.Metric) {
	c := p.counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	byLabel := func(d *prometheus.Desc, m map[string]uint64) {
		for k, v := range m {
			counter(d, v, k)
		}
	}
	ch <- prometheus.MustNewConstMetric(pmConnections, prometheus.GaugeValue, float64(c.Connections))
	byLabel(pmEvents, c.Events)
	counter(pmMalformed, c.Malformed)
	counter(pmResyncs, c.Resyncs)
	byLabel(pmPlans, c.Plans)
	ch <- planSizes(c.PlanSizes)
	counter(pmFallbacks, c.Fallbacks)
	counter(pmCreated, c.Created)
	byLabel(pmFailed, c.CreateFailed)
	counter(pmPortsInUse, c.PortsInUse)
	byLabel(pmBroken, c.Broken)
	byLabel(pmRepaired, c.Repaired)
	byLabel(pmDestroyed, c.Destroyed)
	counter(pmAnnounced, c.Announced)
	counter(pmAnnounceErr, c.AnnounceFailed)
	byLabel(pmLookups, c.Lookups)
	ch <- histogram(pmLookupTime, c.LookupSeconds)
	ch <- prometheus.MustNewConstMetric(pmCacheSize, prometheus.GaugeValue, float64(c.CacheEntries))
	ch <- histogram(pmSetupTime, c.SetupSeconds)
}

// planSizes is the histogram of the plans' sizes.
func planSizes(sizes map[int]uint64) prometheus.Metric {
	h := pm.Histogram{Bounds: planBuckets, Counts: make([]uint64, len(planBuckets)+1)}
	for n := range sizes {
		i, _ := slices.BinarySearch(planBuckets, float64(n))
		h.Counts[i] += sizes[n]
		h.Count += sizes[n]
		h.Sum += float64(n) * float64(sizes[n])
	}
	return histogram(pmPlanSize, h)
}

// histogram turns per-bucket counts into Prometheus's cumulative ones.
func histogram(d *prometheus.Desc, h pm.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}
