package netns_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testnet"
)

// A connection closed with its data unacknowledged, its link gone, stays
// in the namespace as an orphan that retransmits; ResetTCP aborts it.
func TestResetTCPAbortsOrphans(t *testing.T) {
	n := testnet.New(t)
	a, b := n.Node("a"), n.Node("b")
	link := n.Link(a, b, "10.0.0.1/24", "10.0.0.2/24")
	l, err := b.Listen("tcp4", "10.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(context.Background(), nil, "tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := link.SetDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	c.Close() // the kernel goes on sending, the socket an orphan

	ns := &netns.NS{Name: a.Name()}
	if left := tcpSockets(t, a); len(left) != 1 || strings.HasPrefix(left[0], "ESTAB") {
		t.Fatalf("before: ss shows %q in %s, want the one orphan", left, a.Name())
	}
	got, err := ns.ResetTCP()
	if err != nil || got != 1 {
		t.Fatalf("ResetTCP = %d, %v; want 1, nil", got, err)
	}
	if left := tcpSockets(t, a); len(left) != 0 {
		t.Errorf("after: ss shows %q in %s, want none", left, a.Name())
	}
	if got, err := ns.ResetTCP(); err != nil || got != 0 {
		t.Errorf("ResetTCP again = %d, %v; want 0, nil", got, err)
	}
}

// tcpSockets are the lines of `ss -tan` in the node, one a TCP socket.
func tcpSockets(t *testing.T, nd *testnet.Node) []string {
	t.Helper()
	out, err := nd.Exec(t, "ss", "-tanH")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return slices.DeleteFunc(strings.Split(out, "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
}
