package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amptcp/amptcp/cc"
)

func TestCCCollector(t *testing.T) {
	st := &cc.Status{Controls: []cc.Control{{
		Name: cc.LIA, Registered: true, Loaded: 1,
		Counters:    cc.Counters{Acks: 10, CoupledAcks: 7, Losses: 2, ConnsCreated: 3, ConnsDeleted: 1, Swept: 1, SlotsFull: 1},
		Connections: []cc.Connection{{Token: 1, Subflows: []cc.Subflow{{ID: 1}, {ID: 2}}}},
	}}}
	c := CC(func() (*cc.Status, error) { return st, nil })
	want := `
# HELP amptcp_cc_acks_total ACKs that could grow a window, by whether the subflow was coupled.
# TYPE amptcp_cc_acks_total counter
amptcp_cc_acks_total{cc="amp_lia",coupled="false"} 3
amptcp_cc_acks_total{cc="amp_lia",coupled="true"} 7
# HELP amptcp_cc_connections MPTCP connections coupled now.
# TYPE amptcp_cc_connections gauge
amptcp_cc_connections{cc="amp_lia"} 1
# HELP amptcp_cc_entries_total Connection entries, by event: created, deleted (by the last subflow), swept (idle).
# TYPE amptcp_cc_entries_total counter
amptcp_cc_entries_total{cc="amp_lia",event="created"} 3
amptcp_cc_entries_total{cc="amp_lia",event="deleted"} 1
amptcp_cc_entries_total{cc="amp_lia",event="swept"} 1
# HELP amptcp_cc_read_error 1 if this scrape could not read all of the kernel's state.
# TYPE amptcp_cc_read_error gauge
amptcp_cc_read_error 0
# HELP amptcp_cc_subflows Subflows of the coupled connections.
# TYPE amptcp_cc_subflows gauge
amptcp_cc_subflows{cc="amp_lia"} 2
# HELP amptcp_cc_uncoupled_total Subflows left uncoupled, by reason: map_full, connection_full.
# TYPE amptcp_cc_uncoupled_total counter
amptcp_cc_uncoupled_total{cc="amp_lia",reason="connection_full"} 1
amptcp_cc_uncoupled_total{cc="amp_lia",reason="map_full"} 0
`
	names := []string{"amptcp_cc_acks_total", "amptcp_cc_connections", "amptcp_cc_entries_total",
		"amptcp_cc_read_error", "amptcp_cc_subflows", "amptcp_cc_uncoupled_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	failing := CC(func() (*cc.Status, error) { return nil, errors.New("no BPF") })
	if err := testutil.CollectAndCompare(failing, strings.NewReader(`
# HELP amptcp_cc_read_error 1 if this scrape could not read all of the kernel's state.
# TYPE amptcp_cc_read_error gauge
amptcp_cc_read_error 1
`), "amptcp_cc_read_error"); err != nil {
		t.Error(err)
	}
}
