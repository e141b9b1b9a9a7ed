package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/procnet"
	"github.com/amptcp/amptcp/lab/iperf3"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
	"github.com/amptcp/amptcp/mptcp"
)

// iperf3Grace is how long an iperf3 client may run past its flow's
// duration: its control connection, the data connection's handshake and
// the exchange of results, a few round trips each.
const iperf3Grace = 20 * time.Second

// iperf3Ready bounds the wait for an iperf3 server's listening socket.
const iperf3Ready = 5 * time.Second

// mptcpPoll is how often the client's namespace's MPTCP sockets are
// listed while iperf3 runs: its data connection lives for the whole
// test, whole seconds.
const mptcpPoll = 100 * time.Millisecond

// runIperf3 runs a planned iperf3 flow: iperf3's server in To's
// namespace, its client in From's, through mptcpize for MPTCP; and
// records its result at both ends from the client's report. A flow
// whose data connection did not use the flow's protocol (an MPTCP flow
// without MPTCP, or fallen back to TCP) fails, as does one iperf3
// reports an error for; its client's result then carries the error.
func runIperf3(ctx context.Context, plan *topo.Plan, p scenario.Planned, rec traffic.Recorder) error {
	f := p.Traffic[0]
	server := netip.MustParseAddrPort(flowEnds(p, false).server(plan, p.Port)) // formatted from an address and a port
	start := time.Now()
	recs, err := iperf3Flow(ctx, plan.Node(p.From).Namespace, plan.Node(p.To).Namespace, f, server, start)
	if err != nil {
		rec.Record(iperf3.Failed(f, start, time.Now(), err))
		return fmt.Errorf("flow %s: %w", p.Name, err)
	}
	for _, r := range recs {
		rec.Record(r)
	}
	return nil
}

// iperf3Flow runs one iperf3 test between two namespaces while it
// watches the client's MPTCP sockets, and returns its result records.
func iperf3Flow(ctx context.Context, clientNS, serverNS string, f traffic.Flow, server netip.AddrPort, start time.Time) ([]traffic.Record, error) {
	srv, err := startIperf3Server(serverNS, f, server.Port())
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	ctx, cancel := context.WithTimeout(ctx, f.Duration+iperf3Grace)
	defer cancel()
	watch := watchMPTCP(clientNS, server)
	out, stderr, runErr := runIperf3Client(ctx, clientNS, iperf3.ClientArgs(f, server))
	conns, watchErr := watch.stop()
	o, err := iperf3.Decode(out)
	var ie *iperf3.Error
	switch {
	case errors.As(err, &ie):
		return nil, err // iperf3's own error says more than its exit
	case ctx.Err() != nil:
		return nil, fmt.Errorf("iperf3 client did not finish within %v: %w", f.Duration+iperf3Grace, ctx.Err())
	case err != nil && runErr != nil:
		return nil, fmt.Errorf("iperf3 client: %w: %s", runErr, lastLines(stderr))
	case err != nil:
		return nil, err
	}
	used, subflows, err := dataConnection(f.Protocol, conns, o.DataPort(), watchErr)
	if err != nil {
		return nil, err
	}
	return o.Records(f, start, used, subflows), nil
}

// runIperf3Client runs the client's command line in a namespace and
// returns its output; cancelling ctx stops it by its PID.
func runIperf3Client(ctx context.Context, ns string, args []string) (stdout, stderr []byte, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	// Forked from a thread inside the namespace: the client is in it
	// from its first instruction.
	if err := (&netns.NS{Name: ns}).Do(cmd.Start); err != nil {
		return nil, nil, fmt.Errorf("start iperf3 client: %w", withInstallHint(err))
	}
	err = cmd.Wait()
	return out.Bytes(), errOut.Bytes(), err
}

// iperf3Server is a one-test iperf3 server (-1) started in a namespace.
type iperf3Server struct {
	cmd  *exec.Cmd
	out  bytes.Buffer // its stdout and stderr; read only once done is closed
	done chan struct{}
}

// startIperf3Server starts flow f's server in a namespace, in a process
// group of its own, and waits until it listens on port.
func startIperf3Server(ns string, f traffic.Flow, port uint16) (*iperf3Server, error) {
	args := iperf3.ServerArgs(f, port)
	s := &iperf3Server{cmd: exec.Command(args[0], args[1:]...), done: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := (&netns.NS{Name: ns}).Do(s.cmd.Start); err != nil {
		return nil, fmt.Errorf("start iperf3 server: %w", withInstallHint(err))
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	// The server's namespace shows in its /proc/PID/net.
	netDir := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/net"
	listening := func() bool { ok, _ := procnet.TCPListening(netDir, port); return ok }
	deadline := time.Now().Add(iperf3Ready)
	for !listening() {
		select {
		case <-s.done:
			return nil, fmt.Errorf("iperf3 server exited before it listened: %s", lastLines(s.out.Bytes()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("iperf3 server: not listening on port %d after %v", port, iperf3Ready)
		}
	}
	return s, nil
}

// stop gives the server a second to end after its test, as it does by
// itself, and then stops it by its PID (its process group).
func (s *iperf3Server) stop() {
	select {
	case <-s.done:
		return
	case <-time.After(time.Second):
	}
	pid := s.cmd.Process.Pid
	stop(pid, -pid, func() bool {
		select {
		case <-s.done:
			return false
		default:
			return true
		}
	})
}

// withInstallHint says how to get iperf3 or mptcpize when a command
// line's program is missing.
func withInstallHint(err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%w (iperf3 flows need iperf3, and mptcpize for MPTCP: make deps installs them)", err)
	}
	return err
}

// lastLines is the end of a program's output, for an error message.
func lastLines(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = "..." + s[len(s)-512:]
	}
	if s == "" {
		return "no output"
	}
	return s
}

// seenConn is what the client's namespace's MPTCP sockets said of one
// connection to the server while iperf3 ran.
type seenConn struct {
	fallback bool // fell back to TCP, at the last listing
	subflows int  // the most subflows at once
}

// mptcpWatch lists the MPTCP connections of a namespace to a server
// every mptcpPoll, by their local port, until stopped.
type mptcpWatch struct {
	ns     string
	server netip.AddrPort
	done   chan struct{}
	wg     sync.WaitGroup
	conns  map[uint16]seenConn
	err    error // the first listing that failed
}

func watchMPTCP(ns string, server netip.AddrPort) *mptcpWatch {
	w := &mptcpWatch{ns: ns, server: server, done: make(chan struct{}), conns: map[uint16]seenConn{}}
	w.wg.Go(func() {
		t := time.NewTicker(mptcpPoll)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.list()
			}
		}
	})
	return w
}

func (w *mptcpWatch) list() {
	var conns []mptcp.Connection
	err := (&netns.NS{Name: w.ns}).Do(func() (err error) {
		conns, err = mptcp.Connections()
		return err
	})
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	for _, c := range conns {
		if c.Listener || c.Remote.Port() != w.server.Port() || c.Remote.Addr().Unmap() != w.server.Addr() {
			continue
		}
		s := w.conns[c.Local.Port()]
		s.fallback = c.Info.Flags&mptcp.InfoFlagFallback != 0
		s.subflows = max(s.subflows, subflowCount(c.Info))
		w.conns[c.Local.Port()] = s
	}
}

// subflowCount is a connection's subflows, the initial one included
// (SubflowsTotal is 6.8's; before it, the additional ones plus one).
func subflowCount(i mptcp.Info) int {
	if i.SubflowsTotal > 0 {
		return int(i.SubflowsTotal)
	}
	return int(i.Subflows) + 1
}

// stop ends the watch and returns what it saw, and the first error of a
// listing.
func (w *mptcpWatch) stop() (map[uint16]seenConn, error) {
	close(w.done)
	w.wg.Wait()
	return w.conns, w.err
}

// dataConnection decides, from the client's MPTCP connections by local
// port, which protocol iperf3's data connection (from local port port)
// used and how many subflows it had, and fails when that is not the
// flow's protocol: mptcpize that did not preload its library leaves the
// socket plain TCP, and an MPTCP connection may fall back to TCP, and
// iperf3 can tell neither. watchErr is the watch's first error: when no
// listing saw the connection, it may be why.
func dataConnection(want traffic.Protocol, conns map[uint16]seenConn, port uint16, watchErr error) (traffic.Protocol, int, error) {
	c, seen := conns[port]
	switch {
	case seen && !c.fallback && want == traffic.MPTCP:
		return traffic.MPTCP, max(c.subflows, 1), nil
	case seen && !c.fallback:
		return 0, 0, fmt.Errorf("iperf3's data connection (port %d) was MPTCP; the flow is TCP", port)
	case want == traffic.TCP:
		return traffic.TCP, 1, nil
	case seen:
		return 0, 0, fmt.Errorf("iperf3's data connection (port %d) fell back to TCP", port)
	case watchErr != nil:
		return 0, 0, fmt.Errorf("iperf3's data connection (port %d): cannot tell whether it was MPTCP: %w", port, watchErr)
	}
	return 0, 0, fmt.Errorf("iperf3's data connection (port %d) was not an MPTCP socket: did mptcpize preload its library?", port)
}
