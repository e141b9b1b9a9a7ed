package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amptcp/amptcp/pm"
)

func TestPMCollector(t *testing.T) {
	c := PM(func() pm.Counters {
		return pm.Counters{
			Connections: 2,
			Events:      map[string]uint64{"established": 3},
			PlanSizes:   map[int]uint64{1: 1, 3: 2, 12: 1},
			Repaired:    map[string]uint64{"stall": 4},
			LookupSeconds: pm.Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{2, 1, 1},
				Count: 4, Sum: 2.5},
		}
	})
	want := `
# HELP amptcp_pm_connections MPTCP connections tracked now.
# TYPE amptcp_pm_connections gauge
amptcp_pm_connections 2
# HELP amptcp_pm_events_total mptcp_pm events received, by type.
# TYPE amptcp_pm_events_total counter
amptcp_pm_events_total{type="established"} 3
# HELP amptcp_pm_plan_subflows Subflows per plan, the first included.
# TYPE amptcp_pm_plan_subflows histogram
amptcp_pm_plan_subflows_bucket{le="1"} 1
amptcp_pm_plan_subflows_bucket{le="2"} 1
amptcp_pm_plan_subflows_bucket{le="3"} 3
amptcp_pm_plan_subflows_bucket{le="4"} 3
amptcp_pm_plan_subflows_bucket{le="6"} 3
amptcp_pm_plan_subflows_bucket{le="8"} 3
amptcp_pm_plan_subflows_bucket{le="16"} 4
amptcp_pm_plan_subflows_bucket{le="32"} 4
amptcp_pm_plan_subflows_bucket{le="+Inf"} 4
amptcp_pm_plan_subflows_sum 19
amptcp_pm_plan_subflows_count 4
# HELP amptcp_pm_subflows_repaired_total Lost subflows established again, by the reason they were lost.
# TYPE amptcp_pm_subflows_repaired_total counter
amptcp_pm_subflows_repaired_total{reason="stall"} 4
# HELP amptcp_pm_mapping_lookup_seconds Time the mapping system took to answer, or to be given up on.
# TYPE amptcp_pm_mapping_lookup_seconds histogram
amptcp_pm_mapping_lookup_seconds_bucket{le="0.001"} 2
amptcp_pm_mapping_lookup_seconds_bucket{le="0.01"} 3
amptcp_pm_mapping_lookup_seconds_bucket{le="+Inf"} 4
amptcp_pm_mapping_lookup_seconds_sum 2.5
amptcp_pm_mapping_lookup_seconds_count 4
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "amptcp_pm_connections", "amptcp_pm_events_total",
		"amptcp_pm_plan_subflows", "amptcp_pm_subflows_repaired_total", "amptcp_pm_mapping_lookup_seconds"); err != nil {
		t.Error(err)
	}
}
