package testnet_test

import (
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// chain is a - r - b, dual stack, with r forwarding between two subnets.
type chain struct {
	a, r, b *testnet.Node
	ar, rb  *testnet.Link
}

func newChain(t *testing.T) *chain {
	t.Helper()
	n := testnet.New(t)
	c := &chain{a: n.Node("a"), r: n.Node("r"), b: n.Node("b")}
	c.ar = n.Link(c.a, c.r, "10.0.1.1/24,fd00:1::1/64", "10.0.1.2/24,fd00:1::2/64")
	c.rb = n.Link(c.r, c.b, "10.0.2.1/24,fd00:2::1/64", "10.0.2.2/24,fd00:2::2/64")
	c.r.EnableForwarding()
	c.a.AddRoute("10.0.2.0/24", "10.0.1.2")
	c.a.AddRoute("default", "fd00:1::2")
	c.b.AddRoute("default", "10.0.2.1")
	c.b.AddRoute("fd00:1::/64", "fd00:2::1")
	return c
}

// family names the two ends of the chain for one address family.
type family struct {
	name, network, addrA, addrB string
}

var families = []family{
	{"ipv4", "udp4", "10.0.1.1", "10.0.2.2"},
	{"ipv6", "udp6", "fd00:1::1", "fd00:2::2"},
}

// echo opens a socket in b that sends every datagram back, and one in a
// to talk to it. It reports the source address b saw on from.
func echo(t *testing.T, c *chain, f family) (client *net.UDPConn, server *net.UDPAddr, from <-chan string) {
	t.Helper()
	srv, err := c.b.ListenUDP(f.network, net.JoinHostPort(f.addrB, "0"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := c.a.ListenUDP(f.network, net.JoinHostPort(f.addrA, "0"))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 100)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed by cleanup
			}
			select {
			case seen <- addr.Addr().String():
			default: // nobody asked
			}
			srv.WriteToUDPAddrPort(buf[:n], addr)
		}
	}()
	return cli, srv.LocalAddr().(*net.UDPAddr), seen
}

// usable is how long a first datagram may take on a link that is usable:
// below the one-second retransmission of a neighbour solicitation, so
// that a link whose addresses were not ready yet fails the test, and a
// thousand times the fraction of a millisecond a round trip takes, which
// a loaded machine stretches.
const usable = 900 * time.Millisecond

// roundTrip sends one datagram and reports whether its echo came back
// within wait. A send error (no route while a link is down) is a loss.
func roundTrip(t *testing.T, cli *net.UDPConn, to *net.UDPAddr, msg string, wait time.Duration) bool {
	t.Helper()
	if _, err := cli.WriteToUDP([]byte(msg), to); err != nil {
		t.Logf("send %q: %v", msg, err)
		return false
	}
	buf := make([]byte, 1500)
	cli.SetReadDeadline(time.Now().Add(wait))
	for {
		n, _, err := cli.ReadFromUDP(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		if err != nil {
			t.Fatalf("receive echo: %v", err)
		}
		if string(buf[:n]) == msg {
			return true
		}
		// A late echo of an earlier message: keep waiting for ours.
	}
}

func TestChainForwardsUDP(t *testing.T) {
	c := newChain(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			cli, srv, from := echo(t, c, f)
			if !roundTrip(t, cli, srv, "hello", usable) {
				t.Fatalf("no echo from %v through r", srv)
			}
			// Routed, not translated: b sees a's own address.
			if got := <-from; got != f.addrA {
				t.Errorf("b saw the datagram from %s, want %s", got, f.addrA)
			}
		})
	}
}

func TestForwardingOnlyInItsNode(t *testing.T) {
	before := readFile(t, "/proc/sys/net/ipv4/ip_forward")
	c := newChain(t)
	for _, nd := range []*testnet.Node{c.r, c.a} {
		want := map[*testnet.Node]string{c.r: "1", c.a: "0"}[nd]
		var v4, v6 string
		err := nd.Do(func() error {
			v4 = readFile(t, "/proc/sys/net/ipv4/ip_forward")
			v6 = readFile(t, "/proc/sys/net/ipv6/conf/all/forwarding")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if v4 != want || v6 != want {
			t.Errorf("%s: ip_forward=%s ipv6 forwarding=%s, want %s", nd.Name(), v4, v6, want)
		}
	}
	if after := readFile(t, "/proc/sys/net/ipv4/ip_forward"); after != before {
		t.Errorf("root namespace ip_forward changed from %s to %s", before, after)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Taking either link down stops traffic but keeps the addresses of both
// families; bringing it up restores traffic, including the routes the
// kernel dropped with the link.
func TestLinkDownAndUp(t *testing.T) {
	c := newChain(t)
	for _, f := range families {
		cli, srv, _ := echo(t, c, f)
		for _, l := range []*testnet.Link{c.ar, c.rb} {
			name := f.name + "/" + l.Iface(c.r)
			if !roundTrip(t, cli, srv, name+" before", usable) {
				t.Fatalf("%s: no echo before SetDown", name)
			}
			if err := l.SetDown(); err != nil {
				t.Fatal(err)
			}
			if roundTrip(t, cli, srv, name+" down", 200*time.Millisecond) {
				t.Fatalf("%s: echo came back through a link that is down", name)
			}
			if l == c.ar {
				got := addrs(t, c.a, l.Iface(c.a))
				if !slices.Contains(got, "10.0.1.1/24") || !slices.Contains(got, "fd00:1::1/64") {
					t.Fatalf("%s: addresses of a's end while down = %v, want both families kept", name, got)
				}
			}
			if err := l.SetUp(); err != nil {
				t.Fatal(err)
			}
			if !roundTrip(t, cli, srv, name+" up", usable) {
				t.Fatalf("%s: no echo after SetUp", name)
			}
		}
	}
}

func addrs(t *testing.T, nd *testnet.Node, iface string) []string {
	t.Helper()
	link, err := nd.Netlink().LinkByName(iface)
	if err != nil {
		t.Fatal(err)
	}
	list, err := nd.Netlink().AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range list {
		s = append(s, a.IPNet.String())
	}
	return s
}

func TestProcessRunsInNode(t *testing.T) {
	c := newChain(t)
	p := c.b.Start(t, "/bin/sh", "-c", "echo $$; exec sleep 60")
	pid := waitPID(t, p)
	if pid != p.PID() {
		t.Fatalf("shell says pid %d, PID() = %d", pid, p.PID())
	}
	if got, want := nsInode(t, "/proc/"+strconv.Itoa(pid)+"/ns/net"), nsInode(t, c.b.Path()); got != want {
		t.Fatalf("process is in namespace %d, want b's %d", got, want)
	}
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Stop = %v, want the SIGTERM exit", err)
	}
	if err := p.Stop(); err == nil {
		t.Errorf("second Stop = nil, want the same exit error")
	}
	requireGone(t, pid)

	// Not stopped by the test: cleanup must end it.
	var pid2 int
	t.Run("cleanup", func(t *testing.T) {
		pid2 = waitPID(t, c.b.Start(t, "/bin/sh", "-c", "echo $$; exec sleep 60"))
	})
	requireGone(t, pid2)
}

func TestExecRunsInNode(t *testing.T) {
	c := newChain(t)
	// /proc/net/dev lists the interfaces of the reader's namespace.
	out, err := c.b.Exec(t, "cat", "/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, c.rb.Iface(c.b)) || strings.Contains(out, c.ar.Iface(c.a)) {
		t.Errorf("/proc/net/dev in b:\n%s\nwant %s and not %s", out, c.rb.Iface(c.b), c.ar.Iface(c.a))
	}
	if _, err := c.b.Exec(t, "/bin/sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Exec of a failing program = %v, want exit status 3", err)
	}
}

// waitPID reads the PID that "echo $$" printed.
func waitPID(t *testing.T, p *testnet.Process) int { return waitPIDs(t, p)[0] }

// waitPIDs reads the PIDs that the program printed on its first line.
func waitPIDs(t *testing.T, p *testnet.Process) []int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		line, _, ok := strings.Cut(p.Output(), "\n")
		if !ok {
			continue
		}
		var pids []int
		for f := range strings.FieldsSeq(line) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("output %q: %v", line, err)
			}
			pids = append(pids, pid)
		}
		return pids
	}
	t.Fatalf("process printed no PID; output %q", p.Output())
	return nil
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// requireGone checks that pid no longer runs. A process that Stop reaped
// is gone at once; an orphan that it killed may stay a zombie until init
// reaps it, which counts as gone.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	// The state follows the parenthesised command name.
	if _, after, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(after, "Z") {
		return
	}
	t.Errorf("process %d still runs: %q (%v)", pid, stat, err)
}

// After a test's cleanup, nothing with the run's prefix is left: no
// namespace, no link in the root namespace, no process.
func TestCleanupLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	var names []string
	var pids []int
	t.Run("topology", func(t *testing.T) {
		c := newChain(t)
		names = []string{c.a.Name(), c.r.Name(), c.b.Name()}
		// A child that ignores SIGTERM and outlives its parent.
		pids = waitPIDs(t, c.r.Start(t, "/bin/sh", "-c", `(trap "" TERM; exec sleep 60) & echo $$ $!; wait`))
		if _, err := c.a.ListenUDP("udp4", "10.0.1.1:0"); err != nil {
			t.Fatal(err)
		}
	})
	left, err := netns.List(testenv.Prefix + "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if slices.Contains(left, name) {
			t.Errorf("namespace %s left after cleanup", name)
		}
	}
	// With the dash: "at12" must not match another run's "at123".
	links, err := testnet.RemoveRootLinks(testenv.Prefix + "-")
	if err != nil || len(links) > 0 {
		t.Errorf("links named %s-* in the root namespace after cleanup: %v (%v)", testenv.Prefix, links, err)
	}
	for _, pid := range pids {
		requireGone(t, pid)
	}
}
