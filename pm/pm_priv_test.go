package pm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/mptcp"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// twoLinks is a client and a server joined by two links:
//
//	cli 10.0.1.1 ---- 10.0.1.2 srv
//	cli 10.0.2.1 ---- 10.0.2.2 srv
type twoLinks struct {
	net          *testnet.Net
	cli, srv     *testnet.Node
	link1, link2 *testnet.Link
}

func newTwoLinks(t *testing.T) *twoLinks {
	n := testnet.New(t)
	tl := &twoLinks{net: n, cli: n.Node("cli"), srv: n.Node("srv")}
	tl.link1 = n.Link(tl.cli, tl.srv, "10.0.1.1/24", "10.0.1.2/24")
	tl.link2 = n.Link(tl.cli, tl.srv, "10.0.2.1/24", "10.0.2.2/24")
	return tl
}

// setLimits sets the in-kernel path manager's limits of a node, which
// cap the subflows a connection opens and the joins a server accepts.
func setLimits(t *testing.T, nd *testnet.Node, subflows uint32) {
	t.Helper()
	err := nd.Do(func() error {
		c, err := mptcp.Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		return c.SetLimits(mptcp.Limits{Subflows: subflows, AddAddrAccepted: 8})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startDaemon runs a path manager with a configuration in YAML in nd's
// namespace until the test ends, and waits until it runs.
func startDaemon(t *testing.T, nd *testnet.Node, yaml string) *Daemon {
	t.Helper()
	return startDaemonWith(t, nd, yaml, Deps{})
}

// startDaemonWith is startDaemon with some of the daemon's dependencies.
func startDaemonWith(t *testing.T, nd *testnet.Node, yaml string, deps Deps) *Daemon {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Socket = filepath.Join(t.TempDir(), "pm.sock")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(prefixWriter{nd.Name()}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	deps.Log = log
	d, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nd.Do(func() error { return d.Run(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pm in %s: %v", nd.Name(), err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := QueryStatus(cfg.Control.Socket); err == nil {
			return d
		}
		select {
		case err := <-done:
			t.Fatalf("pm in %s: %v", nd.Name(), err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pm in %s does not answer its control socket", nd.Name())
		}
	}
}

// prefixWriter writes the daemons' logs to stderr, named by namespace,
// for go test -v.
type prefixWriter struct{ name string }

func (w prefixWriter) Write(b []byte) (int, error) {
	fmt.Printf("%s: %s", w.name, b)
	return len(b), nil
}

// transfer is an MPTCP connection from cli to a server on srv that reads
// and hashes what it gets.
type transfer struct {
	conn net.Conn
	got  chan [32]byte
	sent []byte
}

func startTransfer(t *testing.T, tl *twoLinks) *transfer {
	t.Helper()
	ln, err := tl.srv.Listen("tcp", "0.0.0.0:5000") // joins come to both addresses
	if err != nil {
		t.Fatal(err)
	}
	tr := &transfer{got: make(chan [32]byte, 1)}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(tr.got)
			return
		}
		defer c.Close()
		h := sha256.New()
		io.Copy(h, c)
		tr.got <- [32]byte(h.Sum(nil))
	}()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.0.1.1")}}
	d.SetMultipathTCP(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if tr.conn, err = tl.cli.Dial(ctx, d, "tcp", "10.0.1.2:5000"); err != nil {
		t.Fatal(err)
	}
	// The first data makes the connection fully established.
	tr.write(t, 64<<10)
	return tr
}

func (tr *transfer) write(t *testing.T, n int) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	tr.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := tr.conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
	tr.sent = append(tr.sent, b...)
}

// finish closes the sending side and checks that the server got every
// byte.
func (tr *transfer) finish(t *testing.T) {
	t.Helper()
	tr.conn.(*net.TCPConn).CloseWrite()
	select {
	case h, ok := <-tr.got:
		if !ok || h != sha256.Sum256(tr.sent) {
			t.Fatalf("the server received other bytes than the %d sent", len(tr.sent))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("transfer timed out")
	}
}

func (tr *transfer) local() netip.AddrPort { return tr.conn.LocalAddr().(*net.TCPAddr).AddrPort() }

// subflowsIn reads the subflows of the connection from local in nd.
func subflowsIn(t *testing.T, nd *testnet.Node, local netip.AddrPort) []mptcp.Subflow {
	t.Helper()
	var all []mptcp.Subflow
	if err := nd.Do(func() (err error) { all, err = mptcp.Subflows(); return err }); err != nil {
		t.Fatal(err)
	}
	var token uint32
	for _, s := range all {
		if unmap(s.Local) == local {
			token = s.Token
		}
	}
	var out []mptcp.Subflow
	for _, s := range all {
		if s.Token == token && token != 0 && s.State == tcpEstablished {
			s.Local, s.Remote = unmap(s.Local), unmap(s.Remote)
			out = append(out, s)
		}
	}
	return out
}

// waitSubflows waits until the connection has n established subflows.
func waitSubflows(t *testing.T, nd *testnet.Node, local netip.AddrPort, n int) []mptcp.Subflow {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		subs := subflowsIn(t, nd, local)
		if len(subs) >= n || time.Now().After(deadline) {
			return subs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connStatus is the daemon's status of the connection from local.
func connStatus(t *testing.T, d *Daemon, local netip.AddrPort) ConnStatus {
	t.Helper()
	for _, c := range d.Status().Connections {
		if c.Local == local {
			return c
		}
	}
	t.Fatalf("the daemon has no connection from %s", local)
	return ConnStatus{}
}

// checkSS checks that `ss -tni` shows exactly these subflows of the
// connection to the server: the chosen local ports, established.
func checkSS(t *testing.T, nd *testnet.Node, want []netip.AddrPort) {
	t.Helper()
	out, err := nd.Exec(t, "ss", "-tnH", "state", "established")
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	var got []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasSuffix(f[3], ":5000") {
			got = append(got, f[2])
		}
	}
	var ws []string
	for _, w := range want {
		ws = append(ws, w.String())
	}
	slices.Sort(got)
	slices.Sort(ws)
	if !slices.Equal(got, ws) {
		t.Errorf("ss -tn shows subflows from %v, want %v:\n%s", got, ws, out)
	}
}

// ndiffports: 3 opens exactly two more subflows on the first one's
// address pair, with the ports the daemon chose, and the three carry the
// transfer.
func TestNdiffportsOnTheKernel(t *testing.T) {
	tl := newTwoLinks(t)
	setLimits(t, tl.srv, 8)
	setLimits(t, tl.cli, 8)
	d := startDaemon(t, tl.cli, "policy: ndiffports\nsubflows: 3\n")
	tr := startTransfer(t, tl)
	if subs := waitSubflows(t, tl.cli, tr.local(), 3); len(subs) != 3 {
		t.Fatalf("%d subflows, want 3", len(subs))
	}
	tr.write(t, 8<<20)

	st := connStatus(t, d, tr.local())
	if st.Plan == nil || st.Plan.N != 3 || len(st.Subflows) != 3 || st.Setup <= 0 {
		t.Fatalf("status %+v", st)
	}
	t.Logf("all planned subflows established %v after ESTABLISHED", st.Setup)
	var want []netip.AddrPort
	for _, s := range st.Subflows {
		if s.State != "up" || s.Local.Addr() != addr("10.0.1.1") || s.Remote != ap("10.0.1.2:5000") {
			t.Errorf("subflow %+v, want up from 10.0.1.1 to 10.0.1.2:5000", s)
		}
		want = append(want, s.Local)
	}
	// Which subflow carries what is the kernel scheduler's choice: wait
	// until the transfer is acknowledged, then more than one must have
	// carried a share (on a busy machine one may carry almost nothing).
	var subs []mptcp.Subflow
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		subs = subflowsIn(t, tl.cli, tr.local())
		var acked uint64
		for _, s := range subs {
			acked += s.TCP.BytesAcked
		}
		if acked >= uint64(len(tr.sent)) || time.Now().After(deadline) {
			break
		}
	}
	var got []netip.AddrPort
	carried := 0
	for _, s := range subs {
		got = append(got, s.Local)
		t.Logf("subflow %s carried %d bytes", s.Local, s.TCP.BytesAcked)
		if s.TCP.BytesAcked >= 64<<10 {
			carried++
		}
	}
	if carried < 2 {
		t.Errorf("%d subflows carried 64 KiB or more of %d bytes, want at least 2", carried, len(tr.sent))
	}
	slices.SortFunc(got, netip.AddrPort.Compare)
	slices.SortFunc(want, netip.AddrPort.Compare)
	if !slices.Equal(got, want) {
		t.Errorf("sock_diag shows subflows from %v, the daemon planned %v", got, want)
	}
	checkSS(t, tl.cli, want)
	tr.finish(t)
}

// sites is a mapping system that knows a local site of one RLOC and a
// peer site of three.
type sites struct{}

func (sites) Lookup(_ context.Context, q Query) (Mapping, error) {
	eid, local := q.EID, q.Local
	p, _ := eid.Prefix(24)
	m := Mapping{EID: mapping.NewEID(0, p), TTL: time.Minute, RLOCs: 3}
	if local {
		m.RLOCs = 1
	}
	return m, nil
}

// amptcp opens as many subflows as the mappings show paths (1×3), with
// source ports whose sums with the server's port fall on the three paths
// of a port-sum xTR, as sock_diag shows them.
func TestAMPTCPOnTheKernel(t *testing.T) {
	tl := newTwoLinks(t)
	setLimits(t, tl.srv, 8)
	setLimits(t, tl.cli, 8)
	d := startDaemonWith(t, tl.cli, "policy: amptcp\namptcp: {map-resolver: 10.0.1.2, equation: 2}\n", Deps{Mapper: sites{}})
	tr := startTransfer(t, tl)
	subs := waitSubflows(t, tl.cli, tr.local(), 3)
	paths := map[int]bool{}
	for _, s := range subs {
		paths[sum(s.Local, s.Remote)%3] = true
	}
	if len(subs) != 3 || len(paths) != 3 {
		t.Errorf("subflows %v take paths %v, want 3 subflows on 3 paths", subs, paths)
	}
	st := connStatus(t, d, tr.local())
	if st.Plan == nil || st.Plan.Policy != PolicyAMPTCP || st.Plan.N != 3 || st.Plan.PathsOut != 3 || st.Setup <= 0 {
		t.Fatalf("status %+v", st)
	}
	t.Logf("all planned subflows established %v after ESTABLISHED, mapping lookups included", st.Setup)
	tr.write(t, 4<<20)
	tr.finish(t)
}

// txBytes is what a node sent on a link.
func txBytes(t *testing.T, nd *testnet.Node, l *testnet.Link) uint64 {
	t.Helper()
	link, err := nd.Netlink().LinkByName(l.Iface(nd))
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Statistics.TxBytes
}

// fullmesh opens a subflow for every pair of addresses, the server's
// announced one included (the server's daemon announces it), and the
// transfer uses both links.
func TestFullmeshOnTheKernel(t *testing.T) {
	tl := newTwoLinks(t)
	setLimits(t, tl.cli, 8)
	startDaemon(t, tl.srv, "policy: default\nannounce: [10.0.2.2]\n")
	d := startDaemon(t, tl.cli, "policy: fullmesh\n")
	before1, before2 := txBytes(t, tl.cli, tl.link1), txBytes(t, tl.cli, tl.link2)
	tr := startTransfer(t, tl)
	subs := waitSubflows(t, tl.cli, tr.local(), 4)
	tr.write(t, 32<<20)

	pairs := map[string]bool{}
	for _, s := range subs {
		pairs[s.Local.Addr().String()+"->"+s.Remote.Addr().String()] = true
	}
	for _, want := range []string{"10.0.1.1->10.0.1.2", "10.0.1.1->10.0.2.2", "10.0.2.1->10.0.1.2", "10.0.2.1->10.0.2.2"} {
		if !pairs[want] {
			t.Errorf("no subflow %s; subflows %v", want, pairs)
		}
	}
	if len(subs) != 4 {
		t.Errorf("%d subflows, want 4", len(subs))
	}
	st := connStatus(t, d, tr.local())
	if st.Plan == nil || st.Plan.N != 4 {
		t.Errorf("plan %+v, want 4 subflows", st.Plan)
	}
	var planned, found []netip.AddrPort
	for _, s := range st.Subflows {
		planned = append(planned, s.Local)
	}
	for _, s := range subs {
		found = append(found, s.Local)
	}
	slices.SortFunc(planned, netip.AddrPort.Compare)
	slices.SortFunc(found, netip.AddrPort.Compare)
	if !slices.Equal(planned, found) {
		t.Errorf("sock_diag shows subflows from %v, the daemon planned %v", found, planned)
	}
	checkSS(t, tl.cli, planned)
	tr.finish(t)
	sent1, sent2 := txBytes(t, tl.cli, tl.link1)-before1, txBytes(t, tl.cli, tl.link2)-before2
	t.Logf("link 1 carried %d bytes, link 2 %d", sent1, sent2)
	// The kernel's scheduler prefers the subflows with the lowest RTT:
	// over veth the 32 MiB take some 30 ms, and one link in ten then
	// carries under 1 MiB (0.8 MB, the other 32.9 MB), but never nothing:
	// 128 KiB is data, the joins' handshakes and ACKs are a few KB.
	if sent1 < 128<<10 || sent2 < 128<<10 {
		t.Errorf("link 1 carried %d bytes, link 2 %d, of 32 MiB: want both used", sent1, sent2)
	}
}

// stream keeps an MPTCP connection from cli to a server on srv busy at
// about 64 MB/s until the test ends; the server discards what it gets.
func stream(t *testing.T, tl *twoLinks) netip.AddrPort {
	t.Helper()
	ln, err := tl.srv.Listen("tcp", "0.0.0.0:5001")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.0.1.1")}}
	d.SetMultipathTCP(true)
	conn, err := tl.cli.Dial(context.Background(), d, "tcp", "10.0.1.2:5001")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		chunk := make([]byte, 64<<10)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			conn.Write(chunk) // a write that times out while paths fail is fine
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		conn.Close()
	})
	return conn.LocalAddr().(*net.TCPAddr).AddrPort()
}

// fullmeshPair starts the daemons of a fullmesh over the two links: the
// server announces its second address.
func fullmeshPair(t *testing.T, tl *twoLinks) *Daemon {
	t.Helper()
	setLimits(t, tl.cli, 8)
	startDaemon(t, tl.srv, "policy: default\nannounce: [10.0.2.2]\n")
	return startDaemon(t, tl.cli, "policy: fullmesh\nrepair: {interval: 250ms, stall-time: 300ms}\n")
}

// waitCarrying waits until the connection has 4 established subflows
// that each acknowledged data since it first saw them, and returns how
// long that took. within only bounds a broken path manager's wait: the
// repair's speed is `amptcp bench pm`'s measurement, not this test's.
func waitCarrying(t *testing.T, tl *twoLinks, local netip.AddrPort, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	acked := map[netip.AddrPort]uint64{}
	for _, s := range subflowsIn(t, tl.cli, local) {
		acked[s.Local] = s.TCP.BytesAcked
	}
	for time.Since(start) < within {
		subs := subflowsIn(t, tl.cli, local)
		moving := 0
		for _, s := range subs {
			before, seen := acked[s.Local]
			switch {
			case !seen:
				acked[s.Local] = s.TCP.BytesAcked
			case s.TCP.BytesAcked > before:
				moving++
			}
		}
		if len(subs) == 4 && moving == 4 {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the connection has not 4 subflows carrying data after %v: %v", within, subflowsIn(t, tl.cli, local))
	return 0
}

// repairWait bounds the waits of the repair tests: 10 times what the
// invisible failure's repair takes on a loaded machine (0.2-0.6 s idle).
const repairWait = 20 * time.Second

// failAndRestore runs a fullmesh connection busy on both links, fails a
// path until the daemon has noticed (noticed says so from its counters),
// restores it, and checks that all four subflows carry data again.
func failAndRestore(t *testing.T, tl *twoLinks, fail, restore func() error, noticed func(Counters) bool) *Daemon {
	t.Helper()
	d := fullmeshPair(t, tl)
	local := stream(t, tl)
	if subs := waitSubflows(t, tl.cli, local, 4); len(subs) != 4 {
		t.Fatalf("%d subflows before the failure, want 4", len(subs))
	}
	waitCarrying(t, tl, local, repairWait)
	if err := fail(); err != nil {
		t.Fatal(err)
	}
	waitCounters(t, d, "reaction to the failure", noticed)
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	took := waitCarrying(t, tl, local, repairWait)
	t.Logf("all subflows carry data again %v after the path returned", took)
	return d
}

// route runs `ip route` in nd.
func route(t *testing.T, nd *testnet.Node, args ...string) func() error {
	return func() error {
		if out, err := nd.Exec(t, "ip", append([]string{"route"}, args...)...); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
}

// A path that fails where the host cannot see it (the server's replies
// to 10.0.2.1 are blackholed) stalls the subflows that use it: the daemon
// destroys them, keeps sending their creates again, and has them all
// back once the path returns, with no link event to tell it.
func TestRepairAfterAnInvisibleFailure(t *testing.T) {
	tl := newTwoLinks(t)
	d := failAndRestore(t, tl, route(t, tl.srv, "add", "blackhole", "10.0.2.1/32"),
		route(t, tl.srv, "del", "blackhole", "10.0.2.1/32"),
		func(c Counters) bool { return c.Destroyed["stall"] > 0 })
	// The events of the last handshakes may trail sock_diag by a moment.
	waitCounters(t, d, "stalled subflows destroyed and repaired", func(c Counters) bool {
		return c.Destroyed["stall"] > 0 && c.Repaired["stall"] > 0
	})
}

// A link that comes back up is used again: the daemon creates the
// missing subflows (at once, on the link event).
func TestRepairWhenALinkComesBack(t *testing.T) {
	tl := newTwoLinks(t)
	d := failAndRestore(t, tl, tl.link2.SetDown, tl.link2.SetUp,
		func(c Counters) bool { return len(c.Broken) > 0 })
	waitCounters(t, d, "subflows broken and repaired", func(c Counters) bool {
		return len(c.Broken) > 0 && len(c.Repaired) > 0
	})
}

// waitCounters waits until the daemon's counters say what ok checks, for
// repairWait at most.
func waitCounters(t *testing.T, d *Daemon, what string, ok func(Counters) bool) {
	t.Helper()
	var c Counters
	for deadline := time.Now().Add(repairWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c = d.Counters(); ok(c) {
			return
		}
	}
	t.Fatalf("no %s within %v: broken %v, destroyed %v, repaired %v", what, repairWait, c.Broken, c.Destroyed, c.Repaired)
}

// A link that comes back is reported only once its unresolved neighbours
// are forgotten: the gateway's entry, left incomplete while the carrier
// was off, would hold a new subflow's SYN until its next retransmission,
// up to a second later.
func TestLinkBackForgetsUnresolvedNeighbours(t *testing.T) {
	tl := newTwoLinks(t)
	var links <-chan struct{}
	var stop func()
	err := tl.cli.Do(func() (err error) {
		links, stop, err = subscribeLinks(slog.New(slog.DiscardHandler))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	peer := tl.link1.Iface(tl.srv)
	if _, err := tl.srv.Exec(t, "ip", "link", "set", peer, "down"); err != nil {
		t.Fatal(err)
	}
	neighbour := func() string {
		t.Helper()
		out, err := tl.cli.Exec(t, "ip", "neigh", "show", "10.0.1.2")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// A datagram to the gateway while the carrier is off leaves its entry
	// unresolved.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(neighbour(), "INCOMPLETE"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no incomplete neighbour entry: %q", neighbour())
		}
		err := tl.cli.Do(func() error {
			c, err := net.Dial("udp", "10.0.1.2:9")
			if err != nil {
				return err
			}
			defer c.Close()
			c.Write([]byte("x")) // no route yet is fine: the next try sends it
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for len(links) > 0 {
		<-links
	}
	if _, err := tl.srv.Exec(t, "ip", "link", "set", peer, "up"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-links:
	case <-time.After(10 * time.Second):
		t.Fatal("the link's return was not reported")
	}
	if n := neighbour(); strings.Contains(n, "INCOMPLETE") || strings.Contains(n, "FAILED") {
		t.Errorf("when the link's return is reported, the gateway's entry is still %q", n)
	}
}
