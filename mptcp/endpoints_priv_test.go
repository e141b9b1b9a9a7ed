package mptcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testnet"
)

// TestEndpoints adds, lists and deletes the in-kernel path manager's
// endpoints and checks each step against `ip mptcp endpoint show`.
func TestEndpoints(t *testing.T) {
	n := testnet.New(t)
	a, b := n.Node("a"), n.Node("b")
	link := n.Link(a, b, "10.9.0.1/24,fd00:9::1/64", "10.9.0.2/24,fd00:9::2/64")
	dev := link.Iface(a)
	l, err := a.Netlink().LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	ifindex := l.Attrs().Index
	c := dialIn(t, a)

	added := []Addr{
		{ID: 5, IP: netip.MustParseAddr("10.9.0.1"), Port: 4242, IfIndex: ifindex, Flags: FlagSignal},
		{ID: 7, IP: netip.MustParseAddr("fd00:9::1"), IfIndex: ifindex, Flags: FlagSubflow | FlagBackup | FlagFullmesh},
		{IP: netip.MustParseAddr("10.9.0.3"), Flags: FlagSubflow}, // the kernel picks the ID
	}
	for _, e := range added {
		if err := c.AddEndpoint(e); err != nil {
			t.Fatalf("AddEndpoint(%s): %v", e, err)
		}
	}
	got, err := c.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Endpoints() = %v; want the 3 added", got)
	}
	byIP := map[netip.Addr]Addr{}
	for _, e := range got {
		byIP[e.IP] = e
	}
	picked := byIP[added[2].IP].ID
	if picked == 0 || picked == 5 || picked == 7 {
		t.Fatalf("the kernel picked id %d for %s; want a free non-zero one", picked, added[2].IP)
	}
	added[2].ID = picked
	for _, want := range added {
		if byIP[want.IP] != want {
			t.Errorf("Endpoints() has %+v; want %+v", byIP[want.IP], want)
		}
	}
	checkEndpointShow(t, a, added, dev)

	if err := c.DeleteEndpoint(5); err != nil {
		t.Fatal(err)
	}
	checkEndpointShow(t, a, added[1:], dev)
	err = c.DeleteEndpoint(99)
	var ce *CommandError
	if !errors.As(err, &ce) || !errors.Is(err, unix.EINVAL) || ce.Message != "address not found" {
		t.Fatalf("DeleteEndpoint(99): %v; want EINVAL with the kernel's \"address not found\"", err)
	}

	if err := c.FlushEndpoints(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Endpoints(); err != nil || len(got) != 0 {
		t.Fatalf("Endpoints() after FlushEndpoints: %v, %v", got, err)
	}
	checkEndpointShow(t, a, nil, dev)
}

// checkEndpointShow compares `ip mptcp endpoint show` with the endpoints
// that should exist, line by line.
func checkEndpointShow(t *testing.T, nd *testnet.Node, want []Addr, dev string) {
	t.Helper()
	out, err := nd.Exec(t, "ip", "mptcp", "endpoint", "show")
	if err != nil {
		t.Fatal(err)
	}
	var lines, wantLines []string
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	for _, e := range want {
		// iproute2: "10.9.0.1 port 4242 id 5 signal dev <ifname>".
		s := e.IP.String()
		if e.Port != 0 {
			s += fmt.Sprintf(" port %d", e.Port)
		}
		s += fmt.Sprintf(" id %d", e.ID)
		if e.Flags != 0 {
			s += " " + e.Flags.String()
		}
		if e.IfIndex != 0 {
			s += " dev " + dev
		}
		wantLines = append(wantLines, s)
	}
	slices.Sort(lines)
	slices.Sort(wantLines)
	if !slices.Equal(lines, wantLines) {
		t.Fatalf("ip mptcp endpoint show:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
}

// TestEventsLost overruns a listener whose receive buffer is tiny with a
// burst of events (each MPTCP listener socket opened and closed is two
// events), and checks that Receive says so, then goes on.
func TestEventsLost(t *testing.T) {
	n := testnet.New(t)
	nd := n.Node("a")
	var l *EventListener
	if err := nd.Do(func() (err error) { l, err = ListenEvents(); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := setRcvBuf(l.conn, 0); err != nil { // the kernel's minimum, about 2 KiB
		t.Fatal(err)
	}
	const burst = 64
	for i := range burst {
		ln, err := nd.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 6000+i))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
	}
	type result struct {
		evs []Event
		err error
	}
	results := make(chan result, 4*burst) // the goroutine never blocks after Close
	go func() {
		for {
			evs, err := l.Receive()
			results <- result{evs, err}
			if errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	timeout := time.After(5 * time.Second)
	received := 0
	for lost := false; !lost; {
		select {
		case r := <-results:
			received += len(r.evs)
			if r.err != nil {
				if !errors.Is(r.err, ErrEventsLost) || !errors.Is(r.err, unix.ENOBUFS) {
					t.Fatalf("Receive: %v; want ErrEventsLost wrapping ENOBUFS", r.err)
				}
				lost = true
			}
		case <-timeout:
			t.Fatalf("no ErrEventsLost within 5 s; received %d of %d events", received, 2*burst)
		}
	}
	if received >= 2*burst {
		t.Fatalf("received all %d events and ErrEventsLost", received)
	}
	// The listener goes on: events sent once the kernel has room again
	// arrive (the kernel drops everything while the queue is congested,
	// so probe until one gets through).
	probe := time.NewTicker(100 * time.Millisecond)
	defer probe.Stop()
	for port := 7000; ; {
		select {
		case r := <-results:
			if r.err != nil && !errors.Is(r.err, ErrEventsLost) {
				t.Fatalf("Receive after the loss: %v", r.err)
			}
			for _, ev := range r.evs {
				if ev.Type == EventListenerCreated && ev.Local.Port() >= 7000 {
					return
				}
			}
		case <-probe.C:
			ln, err := nd.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
			port++
		case <-timeout:
			t.Fatal("no event after the loss within 5 s")
		}
	}
}
