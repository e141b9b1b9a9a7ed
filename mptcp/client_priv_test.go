package mptcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testnet"
)

// twoPaths is a client and a server joined by two links:
// 10.0.1.1 - 10.0.1.2 and 10.0.2.1 - 10.0.2.2.
type twoPaths struct {
	cli, srv *testnet.Node
}

func newTwoPaths(t *testing.T) twoPaths {
	n := testnet.New(t)
	tp := twoPaths{cli: n.Node("cli"), srv: n.Node("srv")}
	n.Link(tp.cli, tp.srv, "10.0.1.1/24", "10.0.1.2/24")
	n.Link(tp.cli, tp.srv, "10.0.2.1/24", "10.0.2.2/24")
	return tp
}

var (
	cli2 = netip.MustParseAddr("10.0.2.1")
	srv1 = netip.MustParseAddr("10.0.1.2")
	srv2 = netip.MustParseAddr("10.0.2.2")
)

const (
	srvPort   = 5000
	joinPort  = 40002 // the chosen source port of the created subflow
	joinID    = 2     // and its local ID
	announced = 3     // the ID of the announced address
)

// TestUserspacePM drives one connection through the userspace path
// manager's commands and checks each one's effect where a user would:
// the events at both ends, sock_diag, `ss`, MPTCP_FULL_INFO, and the
// kernel's refusal of a wrong call.
func TestUserspacePM(t *testing.T) {
	tp := newTwoPaths(t)
	ssPath := "ss"

	// The server runs the in-kernel path manager, whose limits cap the
	// joins it accepts (2 by default).
	srvc := dialIn(t, tp.srv)
	want := Limits{Subflows: 8, AddAddrAccepted: 0}
	if err := srvc.SetLimits(want); err != nil {
		t.Fatal(err)
	}
	if got, err := srvc.Limits(); err != nil || got != want {
		t.Fatalf("Limits() = %+v, %v; want %+v", got, err, want)
	}
	out, err := tp.srv.Exec(t, "ip", "mptcp", "limits", "show")
	if err != nil || !strings.Contains(out, "add_addr_accepted 0") || !strings.Contains(out, "subflows 8") {
		t.Fatalf("ip mptcp limits show: %q, %v; want subflows 8 and add_addr_accepted 0", out, err)
	}

	// The client's namespace switches to the userspace path manager, and
	// back at the end.
	var prev string
	err = tp.cli.Do(func() (err error) {
		if prev, err = PathManager(); err != nil {
			return err
		}
		return SetPathManager("userspace")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.cli.Do(func() error { return SetPathManager(prev) }); err != nil {
			t.Error(err)
		}
	})
	if pm, err := pathManagerIn(tp.cli); err != nil || pm != "userspace" {
		t.Fatalf("PathManager() = %q, %v after SetPathManager(userspace)", pm, err)
	}
	sysctlOut, err := tp.cli.Exec(t, "sysctl", "-n", "net.mptcp.path_manager")
	if err != nil || strings.TrimSpace(sysctlOut) != "userspace" {
		t.Fatalf("sysctl net.mptcp.path_manager: %q, %v", sysctlOut, err)
	}

	// ip mptcp monitor decodes the same events independently.
	monCli := startMonitor(t, tp.cli, 5901)
	monSrv := startMonitor(t, tp.srv, 5902)
	evCli := listenIn(t, tp.cli, "cli")
	evSrv := listenIn(t, tp.srv, "srv")
	c := dialIn(t, tp.cli)

	// A listener on [::]: the server's events carry ::ffff:10.0.1.x,
	// which Event unmaps.
	ln, err := tp.srv.Listen("tcp", fmt.Sprintf(":%d", srvPort))
	if err != nil {
		t.Fatal(err)
	}
	evSrv.wait(t, "listener_created", func(e Event) bool {
		return e.Type == EventListenerCreated && e.Local.Port() == srvPort
	})
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- conn
		io.Copy(io.Discard, conn)
	}()
	d := &net.Dialer{}
	d.SetMultipathTCP(true)
	conn, err := tp.cli.Dial(context.Background(), d, "tcp", netip.AddrPortFrom(srv1, srvPort).String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	sconn := <-accepted
	if sconn == nil {
		t.Fatal("accept failed")
	}
	defer sconn.Close()

	est := evCli.wait(t, "established", func(e Event) bool { return e.Type == EventEstablished })
	created := evCli.wait(t, "created", func(e Event) bool { return e.Type == EventCreated })
	local := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	for _, e := range []Event{created, est} {
		if e.Token == 0 || e.Local != local || e.Remote != netip.AddrPortFrom(srv1, srvPort) || e.Server {
			t.Fatalf("%s = %s; want local %s, remote %s:%d, client side", e.Type, e, local, srv1, srvPort)
		}
	}
	if created.Token != est.Token {
		t.Fatalf("created token %08x, established %08x", created.Token, est.Token)
	}
	token := est.Token
	srvEst := evSrv.wait(t, "established", func(e Event) bool { return e.Type == EventEstablished })
	if !srvEst.Server || srvEst.Local != netip.AddrPortFrom(srv1, srvPort) || srvEst.Remote != local {
		t.Fatalf("server's established = %s; want server side, local %s:%d (unmapped), remote %s", srvEst, srv1, srvPort, local)
	}

	// A second subflow on the second link, with a chosen ID and port.
	join := netip.AddrPortFrom(cli2, joinPort)
	srvJoin := netip.AddrPortFrom(srv2, srvPort)
	if err := c.CreateSubflow(token, Addr{ID: joinID, IP: cli2, Port: joinPort}, srvJoin); err != nil {
		t.Fatal(err)
	}
	sub := evCli.wait(t, "sub_established", func(e Event) bool { return e.Type == EventSubEstablished })
	if sub.Token != token || sub.LocalID != joinID || sub.Local != join || sub.Remote != srvJoin || sub.Backup {
		t.Fatalf("sub_established = %s; want token %08x loc_id %d local %s remote %s", sub, token, joinID, join, srvJoin)
	}

	// Bytes the application writes are acknowledged on the subflows.
	payload := make([]byte, 1<<20)
	if _, err := conn.Write(payload); err != nil {
		t.Fatal(err)
	}
	subs := waitSubflows(t, tp.cli, token, func(subs []Subflow) bool {
		var acked uint64
		for _, s := range subs {
			acked += s.TCP.BytesAcked
		}
		return len(subs) == 2 && acked >= uint64(len(payload))
	})
	checkSubflows(t, subs, local, join, token)
	checkSS(t, tp.cli, ssPath, subs, token)
	if *capture {
		captureDiag(t, tp.cli, token)
	}

	// The connection-level DATA_ACK may trail the subflows' ACKs.
	var fi *FullInfo
	for deadline := time.Now().Add(5 * time.Second); ; {
		if fi, err = ReadFullInfo(conn.(syscall.Conn)); err != nil {
			t.Fatal(err)
		}
		if fi.Info.BytesAcked >= uint64(len(payload)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkFullInfo(t, fi, local, join, len(payload))

	conns, err := connectionsIn(tp.cli)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, cn := range conns {
		if cn.Token == token {
			found = true
			if cn.Local != local || cn.Listener || cn.Info.Subflows != 1 || cn.Info.BytesAcked < uint64(len(payload)) {
				t.Errorf("Connections(): %+v; want local %s, 1 extra subflow, %d bytes acked", cn, local, len(payload))
			}
		}
	}
	if !found {
		t.Fatalf("Connections() has no token %08x: %+v", token, conns)
	}

	// Backup priority reaches the server as MP_PRIO.
	if err := c.SetBackup(token, join, srvJoin, true); err != nil {
		t.Fatal(err)
	}
	prio := evSrv.wait(t, "sub_priority", func(e Event) bool { return e.Type == EventSubPriority })
	if !prio.Backup || prio.Local != srvJoin || prio.Remote != join {
		t.Fatalf("server's sub_priority = %s; want backup, local %s remote %s", prio, srvJoin, join)
	}

	// An announcement reaches the server as ANNOUNCED, its removal as
	// REMOVED.
	if err := c.Announce(token, Addr{ID: announced, IP: cli2}); err != nil {
		t.Fatal(err)
	}
	ann := evSrv.wait(t, "announced", func(e Event) bool { return e.Type == EventAnnounced })
	if ann.RemoteID != announced || ann.Remote.Addr() != cli2 {
		t.Fatalf("server's announced = %s; want rem_id %d address %s", ann, announced, cli2)
	}
	if err := c.Remove(token, announced); err != nil {
		t.Fatal(err)
	}
	rem := evSrv.wait(t, "removed", func(e Event) bool { return e.Type == EventRemoved })
	if rem.RemoteID != announced {
		t.Fatalf("server's removed = %s; want rem_id %d", rem, announced)
	}

	// The join's ID on another port is the kernel's error, with its reason.
	err = c.CreateSubflow(token, Addr{ID: joinID, IP: cli2, Port: joinPort + 1}, srvJoin)
	var ce *CommandError
	if !errors.As(err, &ce) || !errors.Is(err, unix.EINVAL) || !strings.Contains(ce.Message, "did not match address and id") {
		t.Fatalf("CreateSubflow with a used ID on another port: %v; want EINVAL with the kernel's message", err)
	}

	if err := c.DestroySubflow(token, join, srvJoin); err != nil {
		t.Fatal(err)
	}
	closed := evCli.wait(t, "sub_closed", func(e Event) bool { return e.Type == EventSubClosed })
	if closed.Token != token || closed.Local != join || closed.Remote != srvJoin {
		t.Fatalf("sub_closed = %s; want token %08x local %s remote %s", closed, token, join, srvJoin)
	}

	conn.Close()
	sconn.Close()
	evCli.wait(t, "closed", func(e Event) bool { return e.Type == EventClosed && e.Token == token })
	ln.Close()
	evSrv.wait(t, "listener_closed", func(e Event) bool {
		return e.Type == EventListenerClosed && e.Local.Port() == srvPort
	})
	evSrv.wait(t, "closed", func(e Event) bool { return e.Type == EventClosed && e.Token == srvEst.Token })

	compareWithMonitor(t, evCli, monCli)
	compareWithMonitor(t, evSrv, monSrv)
}

func pathManagerIn(nd *testnet.Node) (pm string, err error) {
	err = nd.Do(func() error { pm, err = PathManager(); return err })
	return pm, err
}

func connectionsIn(nd *testnet.Node) (conns []Connection, err error) {
	err = nd.Do(func() error { conns, err = Connections(); return err })
	return conns, err
}

// waitSubflows polls Subflows() in nd until ok accepts the connection's
// subflows.
func waitSubflows(t *testing.T, nd *testnet.Node, token uint32, ok func([]Subflow) bool) []Subflow {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var all []Subflow
		err := nd.Do(func() (err error) { all, err = Subflows(); return err })
		if err != nil {
			t.Fatal(err)
		}
		var subs []Subflow
		for _, s := range all {
			if s.Token == token {
				subs = append(subs, s)
			}
		}
		if ok(subs) {
			return subs
		}
		if time.Now().After(deadline) {
			t.Fatalf("Subflows() of token %08x after 5 s: %+v", token, subs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkSubflows(t *testing.T, subs []Subflow, first, join netip.AddrPort, token uint32) {
	t.Helper()
	byLocal := map[netip.AddrPort]Subflow{}
	for _, s := range subs {
		byLocal[s.Local] = s
	}
	s1, ok1 := byLocal[first]
	s2, ok2 := byLocal[join]
	if !ok1 || !ok2 {
		t.Fatalf("Subflows(): %+v; want local ends %s and %s", subs, first, join)
	}
	if s1.LocalID != 0 || s2.LocalID != joinID || s2.Remote != netip.AddrPortFrom(srv2, srvPort) || s2.State != 1 {
		t.Fatalf("join subflow %+v; want local id %d, remote %s:%d, established", s2, joinID, srv2, srvPort)
	}
	for _, s := range subs {
		if s.TCP.RTT <= 0 || s.TCP.SndCwnd == 0 || s.TCP.BytesAcked == 0 || s.TCP.Len < 248 {
			t.Errorf("subflow %s: tcp_info %+v; want an RTT, a cwnd, acked bytes", s.Local, s.TCP)
		}
	}
}

// checkSS compares Subflows() with `ss -tni` in the namespace, which
// prints "token:<remote>(id:<rem>)/<local>(id:<loc>)" per subflow, and
// finds the connection in `ss -Mni`.
func checkSS(t *testing.T, nd *testnet.Node, ss string, subs []Subflow, token uint32) {
	t.Helper()
	out, err := nd.Exec(t, ss, "-tni", "state", "established")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		i := strings.Index(out, s.Local.String()+" ")
		if i < 0 {
			t.Fatalf("ss -tni has no subflow from %s:\n%s", s.Local, out)
		}
		block := out[i:]
		if j := strings.Index(block, "\nESTAB"); j > 0 {
			block = block[:j]
		}
		want := fmt.Sprintf("/%x(id:%d)", token, s.LocalID)
		if !strings.Contains(block, want) || !strings.Contains(block, "tcp-ulp-mptcp") {
			t.Errorf("ss -tni for %s lacks %q:\n%s", s.Local, want, block)
		}
	}
	out, err = nd.Exec(t, ss, "-Mni")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("token:%x", token)) {
		t.Errorf("ss -Mni has no token %x:\n%s", token, out)
	}
}

func checkFullInfo(t *testing.T, fi *FullInfo, first, join netip.AddrPort, written int) {
	t.Helper()
	if len(fi.Subflows) != 2 {
		t.Fatalf("ReadFullInfo: %d subflows, want 2: %+v", len(fi.Subflows), fi.Subflows)
	}
	var acked uint64
	locals := map[netip.AddrPort]bool{}
	for _, s := range fi.Subflows {
		locals[s.Local] = true
		acked += s.TCP.BytesAcked
		if s.ID == 0 || !s.Remote.IsValid() {
			t.Errorf("ReadFullInfo subflow %+v: want an id and a remote address", s)
		}
	}
	if !locals[first] || !locals[join] {
		t.Errorf("ReadFullInfo subflows from %v, want %s and %s", locals, first, join)
	}
	if acked < uint64(written) || fi.Info.BytesAcked < uint64(written) || fi.Info.Len != MPTCPInfoSize || fi.Info.SubflowsTotal != 2 {
		t.Errorf("ReadFullInfo: %d bytes acked on subflows, info %+v; want at least %d, 2 subflows", acked, fi.Info, written)
	}
}

// compareWithMonitor checks that each event decodes to what
// `ip mptcp monitor` printed for it, and writes the captures with
// -capture.
func compareWithMonitor(t *testing.T, el *eventLog, mon *monitor) {
	t.Helper()
	events, raw := el.snapshot()
	var lines []string
	deadline := time.Now().Add(2 * time.Second)
	for {
		lines = mon.lines()
		if len(lines) >= len(events) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(lines) != len(events) {
		t.Fatalf("%s: %d events, ip mptcp monitor printed %d:\n%s\nmonitor:\n%s", el.name, len(events), len(lines), el.dump(), strings.Join(lines, "\n"))
	}
	for i, ev := range events {
		if diff := diffMonitor(ev, lines[i]); diff != "" {
			t.Errorf("%s: event %d %s, monitor %q: %s", el.name, i, ev, lines[i], diff)
		}
	}
	if *capture {
		writeCapture(t, el.name, raw, lines)
	}
}
