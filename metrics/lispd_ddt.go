package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/amptcp/amptcp/daemon"
)

// The DDT metrics: the answers of a DDT node or DDT map-server, and the
// map-resolver's resolution through the tree.
var (
	ddtRequests  = desc("ddt_map_requests_total", "DDT Map-Requests answered as DDT node or DDT map-server.")
	ddtSent      = desc("ddt_map_referrals_sent_total", "Records of the Map-Referrals sent, by action.", "action")
	ddtDropped   = desc("ddt_map_requests_dropped_total", "DDT Map-Requests not answered, by reason.", "reason")
	ddtForwarded = desc("ddt_map_requests_forwarded_total", "DDT Map-Requests the map-server forwarded to an ETR.")
	ddtProxied   = desc("ddt_map_replies_sent_total", "Map-Replies the map-server sent for ETRs to DDT Map-Requests.")

	ddtrRequests  = desc("ddt_resolver_requests_total", "ITRs' Map-Requests resolved through the DDT.")
	ddtrCacheHits = desc("ddt_resolver_cache_hits_total", "Requests that started at a cached referral (positive) or were answered by a cached negative one (negative).", "kind")
	ddtrSent      = desc("ddt_resolver_map_requests_sent_total", "DDT Map-Requests sent, tries included.")
	ddtrTimeouts  = desc("ddt_resolver_timeouts_total", "DDT Map-Requests unanswered within the request timeout.")
	ddtrGivenUp   = desc("ddt_resolver_given_up_total", "Requests given up after every RLOC of a referral set had its tries.")
	ddtrResolved  = desc("ddt_resolver_resolved_total", "Requests a map-server acknowledged (MS-ACK).")
	ddtrNegatives = desc("ddt_resolver_negative_replies_total", "Negative Map-Replies the DDT resolution sent to ITRs on a referral received (those from the cache are cache_hits_total{kind=\"negative\"}).")
	ddtrStale     = desc("ddt_resolver_stale_referrals_total", "Cached referrals dropped because their node was no longer authoritative.")
	ddtrReferrals = desc("ddt_resolver_referrals_total", "Map-Referrals followed, by action.", "action")
	ddtrRefused   = desc("ddt_resolver_referrals_refused_total", "Map-Referrals refused, by reason.", "reason")
	ddtrEntries   = desc("ddt_resolver_cache_entries", "Entries of the referral cache.")
	ddtrPending   = desc("ddt_resolver_pending_requests", "Requests being resolved through the DDT.")
)

func describeDDT(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ddtRequests, ddtSent, ddtDropped, ddtForwarded, ddtProxied,
		ddtrRequests, ddtrCacheHits, ddtrSent, ddtrTimeouts, ddtrGivenUp, ddtrResolved, ddtrNegatives, ddtrStale,
		ddtrReferrals, ddtrRefused, ddtrEntries, ddtrPending} {
		ch <- d
	}
}

func collectDDT(ch chan<- prometheus.Metric, c daemon.Counters,
	counter func(*prometheus.Desc, uint64, ...string), byLabel func(*prometheus.Desc, map[string]uint64)) {
	if d := c.DDT; d != nil {
		counter(ddtRequests, d.Requests)
		byLabel(ddtSent, d.Referrals)
		byLabel(ddtDropped, d.Dropped)
		counter(ddtForwarded, d.Forwarded)
		counter(ddtProxied, d.Proxied)
	}
	if r := c.DDTResolver; r != nil {
		counter(ddtrRequests, r.Requests)
		counter(ddtrCacheHits, r.CachePositive, "positive")
		counter(ddtrCacheHits, r.CacheNegative, "negative")
		counter(ddtrSent, r.Sent)
		counter(ddtrTimeouts, r.Timeouts)
		counter(ddtrGivenUp, r.Exhausted)
		counter(ddtrResolved, r.Resolved)
		counter(ddtrNegatives, r.Negatives)
		counter(ddtrStale, r.Stale)
		byLabel(ddtrReferrals, r.Referrals)
		byLabel(ddtrRefused, r.Refused)
		ch <- prometheus.MustNewConstMetric(ddtrEntries, prometheus.GaugeValue, float64(r.CacheEntries))
		ch <- prometheus.MustNewConstMetric(ddtrPending, prometheus.GaugeValue, float64(r.Pending))
	}
}
