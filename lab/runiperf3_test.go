package lab

import (
	"errors"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/lab/traffic"
)

// dataConnection fails a flow whose data connection did not use the
// flow's protocol, and says why.
func TestDataConnection(t *testing.T) {
	const port = 40000
	mptcp2 := map[uint16]seenConn{port: {subflows: 2}, 40001: {}}
	fellBack := map[uint16]seenConn{port: {fallback: true, subflows: 1}}
	other := map[uint16]seenConn{40001: {subflows: 1}} // iperf3's control connection only
	listErr := errors.New("sock_diag: permission denied")
	for _, c := range []struct {
		name     string
		want     traffic.Protocol
		conns    map[uint16]seenConn
		watchErr error
		used     traffic.Protocol
		subflows int
		err      string
	}{
		{"mptcp", traffic.MPTCP, mptcp2, nil, traffic.MPTCP, 2, ""},
		{"mptcp, a listing failed after", traffic.MPTCP, mptcp2, listErr, traffic.MPTCP, 2, ""},
		{"tcp", traffic.TCP, other, nil, traffic.TCP, 1, ""},
		{"tcp, fallen back", traffic.TCP, fellBack, nil, traffic.TCP, 1, ""},
		{"mptcp, not preloaded", traffic.MPTCP, other, nil, 0, 0, "(port 40000) was not an MPTCP socket: did mptcpize preload"},
		{"mptcp, fell back", traffic.MPTCP, fellBack, nil, 0, 0, "(port 40000) fell back to TCP"},
		{"mptcp, not listed", traffic.MPTCP, nil, listErr, 0, 0, "cannot tell whether it was MPTCP: sock_diag: permission denied"},
		{"tcp, but mptcp", traffic.TCP, mptcp2, nil, 0, 0, "(port 40000) was MPTCP; the flow is TCP"},
	} {
		used, subflows, err := dataConnection(c.want, c.conns, port, c.watchErr)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || used != c.used || subflows != c.subflows {
			t.Errorf("%s: %s over %d subflows, %v; want %s over %d", c.name, used, subflows, err, c.used, c.subflows)
		}
	}
}
