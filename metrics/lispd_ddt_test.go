package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amptcp/amptcp/daemon"
)

func TestDDTMetrics(t *testing.T) {
	c := Lispd(func() daemon.Counters {
		return daemon.Counters{
			DDT: &daemon.DDTCounters{Requests: 5, Referrals: map[string]uint64{"ms-ack": 3, "delegation-hole": 2}},
			DDTResolver: &daemon.DDTResolverCounters{Requests: 7, CacheNegative: 2, Timeouts: 1, CacheEntries: 4,
				Refused: map[string]uint64{"loop": 1, "malformed": 0}},
		}
	})
	want := `
# HELP lispd_ddt_map_referrals_sent_total Records of the Map-Referrals sent, by action.
# TYPE lispd_ddt_map_referrals_sent_total counter
lispd_ddt_map_referrals_sent_total{action="delegation-hole"} 2
lispd_ddt_map_referrals_sent_total{action="ms-ack"} 3
# HELP lispd_ddt_resolver_cache_hits_total Requests that started at a cached referral (positive) or were answered by a cached negative one (negative).
# TYPE lispd_ddt_resolver_cache_hits_total counter
lispd_ddt_resolver_cache_hits_total{kind="negative"} 2
lispd_ddt_resolver_cache_hits_total{kind="positive"} 0
# HELP lispd_ddt_resolver_referrals_refused_total Map-Referrals refused, by reason.
# TYPE lispd_ddt_resolver_referrals_refused_total counter
lispd_ddt_resolver_referrals_refused_total{reason="loop"} 1
lispd_ddt_resolver_referrals_refused_total{reason="malformed"} 0
# HELP lispd_ddt_resolver_cache_entries Entries of the referral cache.
# TYPE lispd_ddt_resolver_cache_entries gauge
lispd_ddt_resolver_cache_entries 4
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "lispd_ddt_map_referrals_sent_total",
		"lispd_ddt_resolver_cache_hits_total", "lispd_ddt_resolver_referrals_refused_total", "lispd_ddt_resolver_cache_entries"); err != nil {
		t.Error(err)
	}
}
