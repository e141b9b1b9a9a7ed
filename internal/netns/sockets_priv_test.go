package netns_test

import (
	"context"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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
	if left := tcpSockets(t, ns); len(left) != 1 || left[0].State == unix.BPF_TCP_ESTABLISHED {
		t.Fatalf("before: %d TCP sockets in %s (%v), want the one orphan", len(left), a.Name(), states(left))
	}
	got, err := ns.ResetTCP()
	if err != nil || got != 1 {
		t.Fatalf("ResetTCP = %d, %v; want 1, nil", got, err)
	}
	if left := tcpSockets(t, ns); len(left) != 0 {
		t.Errorf("after: %d TCP sockets left in %s (%v)", len(left), a.Name(), states(left))
	}
	if got, err := ns.ResetTCP(); err != nil || got != 0 {
		t.Errorf("ResetTCP again = %d, %v; want 0, nil", got, err)
	}
}

func tcpSockets(t *testing.T, ns *netns.NS) []*netlink.Socket {
	t.Helper()
	var socks []*netlink.Socket
	err := ns.Do(func() error {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			s, err := netlink.SocketDiagTCP(family)
			if err != nil {
				return err
			}
			socks = append(socks, s...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return socks
}

func states(socks []*netlink.Socket) []uint8 {
	var s []uint8
	for _, k := range socks {
		s = append(s, k.State)
	}
	return s
}
