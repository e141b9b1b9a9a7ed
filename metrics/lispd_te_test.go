package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/daemon"
)

// The te role's RTT matrix (milliseconds in the status, seconds here),
// its links' states and its sets, with why each last changed.
func TestTEMetrics(t *testing.T) {
	c := Lispd(func() daemon.Counters {
		return daemon.Counters{TE: &pce.Counters{
			Nodes: 3, Edges: 2, Pairs: 1, Scrapes: 9, ScrapeErrors: 1, Changes: 2,
			Matrix: []pce.Link{
				{From: "xs", To: "r1", Address: "10.0.1.1", Up: true, RTT: 41.5, MinRTT: 40},
				{From: "xs", To: "r2", Address: "10.0.2.1"},
			},
			Sets: []pce.SetGauge{{Source: "xs", Destination: "10.2.0.0/24", ELPs: 3, Age: 90 * time.Second, Reason: "xs no longer reaches r2"}},
		}}
	})
	want := `
# HELP lispd_te_link_min_rtt_seconds The RTT matrix the te role weighs links by: the least RTT of the last 30 seconds.
# TYPE lispd_te_link_min_rtt_seconds gauge
lispd_te_link_min_rtt_seconds{address="10.0.1.1",from="xs",to="r1"} 0.04
# HELP lispd_te_link_up Whether a router finds an address of another up (1) or down (0).
# TYPE lispd_te_link_up gauge
lispd_te_link_up{address="10.0.1.1",from="xs",to="r1"} 1
lispd_te_link_up{address="10.0.2.1",from="xs",to="r2"} 0
# HELP lispd_te_reads_total Reads of the routers' RTTs, by result: ok or error.
# TYPE lispd_te_reads_total counter
lispd_te_reads_total{result="error"} 1
lispd_te_reads_total{result="ok"} 9
# HELP lispd_te_set_age_seconds Time since a pair's set last changed.
# TYPE lispd_te_set_age_seconds gauge
lispd_te_set_age_seconds{destination="10.2.0.0/24",source="xs"} 90
# HELP lispd_te_set_change_info Why a pair's set last changed (always 1; the reason is the label).
# TYPE lispd_te_set_change_info gauge
lispd_te_set_change_info{destination="10.2.0.0/24",reason="xs no longer reaches r2",source="xs"} 1
# HELP lispd_te_set_elps ELPs in a pair's set.
# TYPE lispd_te_set_elps gauge
lispd_te_set_elps{destination="10.2.0.0/24",source="xs"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "lispd_te_link_min_rtt_seconds", "lispd_te_link_up",
		"lispd_te_reads_total", "lispd_te_set_age_seconds", "lispd_te_set_change_info", "lispd_te_set_elps"); err != nil {
		t.Error(err)
	}
}
