package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amptcp/amptcp/daemon"
)

func TestLispdCollector(t *testing.T) {
	c := Lispd(func() daemon.Counters {
		return daemon.Counters{
			Received:      map[string]uint64{"Map-Register": 5},
			MapRegisters:  map[string]uint64{"accepted": 3, "auth-failed": 2},
			Registrations: 3, ReplyNegatives: 4, Forwarded: 1,
			Dropped: map[string]uint64{"rate-limited": 9},
		}
	})
	want := `
# HELP lispd_map_registers_total Map-Registers by result: accepted, or the reason they were refused.
# TYPE lispd_map_registers_total counter
lispd_map_registers_total{result="accepted"} 3
lispd_map_registers_total{result="auth-failed"} 2
# HELP lispd_registrations EID-prefixes registered now.
# TYPE lispd_registrations gauge
lispd_registrations 3
# HELP lispd_map_reply_records_total Records of the Map-Replies sent, by kind: mapping (proxy) or negative.
# TYPE lispd_map_reply_records_total counter
lispd_map_reply_records_total{kind="mapping"} 0
lispd_map_reply_records_total{kind="negative"} 4
# HELP lispd_map_requests_dropped_total Map-Requests not answered, by reason.
# TYPE lispd_map_requests_dropped_total counter
lispd_map_requests_dropped_total{reason="rate-limited"} 9
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"lispd_map_registers_total", "lispd_registrations", "lispd_map_reply_records_total", "lispd_map_requests_dropped_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 17 { // one per label value given, one per unlabelled metric
		t.Errorf("%d metrics collected, want 17", n)
	}
}

func TestTunnelMetrics(t *testing.T) {
	c := Lispd(func() daemon.Counters {
		return daemon.Counters{Tunnel: &daemon.TunnelCounters{
			MapRegisters: 4,
			MapNotifies:  map[string]uint64{"accepted": 3, "auth-failed": 1},
			MapReplies:   map[string]uint64{"accepted": 2, "unsolicited": 5},
			Entries:      7,
			ProbesSent:   10, ProbesAnswered: 8,
			Locators: []daemon.LocatorGauge{
				{Address: "192.0.2.1", Up: true, RTT: 0.012},
				{Address: "192.0.2.11", Up: false}, // never answered: no RTT
			},
			Dataplane: map[string]uint64{"itr_encapsulated": 100, "rtr_reencapsulated": 3},
		}}
	})
	want := `
# HELP lispd_xtr_map_notifies_total Map-Notifies the xtr received, by result: accepted, or the reason they were refused.
# TYPE lispd_xtr_map_notifies_total counter
lispd_xtr_map_notifies_total{result="accepted"} 3
lispd_xtr_map_notifies_total{result="auth-failed"} 1
# HELP lispd_map_cache_map_replies_total Map-Replies the map-cache received, by result: accepted, or unsolicited (refused).
# TYPE lispd_map_cache_map_replies_total counter
lispd_map_cache_map_replies_total{result="accepted"} 2
lispd_map_cache_map_replies_total{result="unsolicited"} 5
# HELP lispd_map_cache_entries Map-cache entries now, the site's own prefixes included.
# TYPE lispd_map_cache_entries gauge
lispd_map_cache_entries 7
# HELP lispd_locator_up Whether a probed locator is up (1) or down (0).
# TYPE lispd_locator_up gauge
lispd_locator_up{locator="192.0.2.1"} 1
lispd_locator_up{locator="192.0.2.11"} 0
# HELP lispd_locator_rtt_seconds Smoothed round-trip time of RLOC probes to a locator.
# TYPE lispd_locator_rtt_seconds gauge
lispd_locator_rtt_seconds{locator="192.0.2.1"} 0.012
# HELP lispd_dataplane_packets_total The data plane's packet counters, by name.
# TYPE lispd_dataplane_packets_total counter
lispd_dataplane_packets_total{counter="itr_encapsulated"} 100
lispd_dataplane_packets_total{counter="rtr_reencapsulated"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "lispd_xtr_map_notifies_total", "lispd_map_cache_map_replies_total",
		"lispd_map_cache_entries", "lispd_locator_up", "lispd_locator_rtt_seconds", "lispd_dataplane_packets_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
