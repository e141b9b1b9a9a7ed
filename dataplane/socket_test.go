package dataplane_test

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/testnet"
)

// The ITR lets go of a local sender's socket as the kernel's forwarding
// does (ip_rcv): a packet from a socket of the same machine (here hostA's,
// through a veth) that waits in a queue past the ITR no longer counts
// against its sender, whose TCP would otherwise hold back (its small-queue
// limit) for what only the router holds. Kept, the bytes queued at xtrA
// would be the sender's (ss's skmem t, the bytes of its packets not yet
// freed); released, the socket owns almost nothing while xtrA's queue
// holds a packet or more.
func TestITRReleasesTheSendersSocket(t *testing.T) {
	s := newSites(t, config.Dataplane{})
	for _, dev := range s.rlocA {
		if out, err := s.xtrA.Exec(t, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
			"rate", "40mbit", "burst", "32kb", "latency", "1s"); err != nil {
			t.Fatalf("tc: %v: %s", err, out)
		}
	}
	ln, _ := hashingServer(t, s.hostB, "10.2.0.1:0")
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Cubic fills the queue, where the kernel's default here (BBR) keeps
	// it short.
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := s.hostA.Dial(ctx, d, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 1<<20)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		for ctx.Err() == nil {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	const queued = 16 << 10 // a packet or more
	most, ownedThen := 0, 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		backlog := 0
		for _, dev := range s.rlocA {
			backlog += rootBacklog(t, s.xtrA, dev)
		}
		out, err := s.hostA.Exec(t, "ss", "-tmnH", "state", "established", "dst", "10.2.0.1")
		if err != nil {
			t.Fatalf("ss: %v: %s", err, out)
		}
		owned := skmemT(t, out)
		if backlog >= queued && owned < backlog/8 {
			return
		}
		if backlog > most {
			most, ownedThen = backlog, owned
		}
	}
	t.Errorf("when xtrA's queues held the most, %d bytes, hostA's socket owned %d below TCP; want it to own an eighth at most once %d are queued",
		most, ownedThen, queued)
}

// rootBacklog is the bytes queued in the root qdisc of a node's interface.
func rootBacklog(t *testing.T, nd *testnet.Node, name string) int {
	t.Helper()
	l, err := nd.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	qdiscs, err := nd.Netlink().QdiscList(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qdiscs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Statistics != nil && a.Statistics.Queue != nil {
			return int(a.Statistics.Queue.Backlog)
		}
	}
	t.Fatalf("%s has no root qdisc with statistics", name)
	return 0
}

// skmemT is the t of ss's skmem: the bytes of a socket's packets not yet
// freed.
func skmemT(t *testing.T, ss string) int {
	t.Helper()
	m := regexp.MustCompile(`skmem:\(r\d+,rb\d+,t(\d+),`).FindStringSubmatch(ss)
	if m == nil {
		t.Fatalf("no skmem in ss's %q", ss)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
