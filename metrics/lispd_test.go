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
