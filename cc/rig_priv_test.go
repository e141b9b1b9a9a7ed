package cc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/mptcp"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is a client, a router and a server. The client reaches the router
// over one veth per client address (10.77.k.1 to 10.77.k.2, k from 1),
// and the router the server over emulated links, the bottlenecks
// (10.77.(100+j).1 to 10.77.(100+j).2, j from 1). Traffic from client
// address k crosses bottleneck route[k-1], in both directions. The server
// answers on srvAddr, on its loopback. The client's MPTCP connections
// start on address 1 and the kernel's path manager adds a subflow from
// each address 2..subflows.
type rig struct {
	t           *testing.T
	cli, r, srv *testnet.Node
	bottlenecks []*linkemu.Link
	nextPort    atomic.Int32
}

const srvAddr = "10.77.200.2"

// sendBuffers is net.ipv4.tcp_wmem for the rig. Linux's MPTCP gives a
// connection the send buffer of its subflows together plus the first
// value (the minimum, which no TCP socket here comes near), and its
// scheduler puts data in a subflow's queue as long as the subflow's own
// buffer has room, shared by how fast each subflow went when the data
// was queued. With the default of 1 MiB a subflow that slows down
// (wVegas leaving a path whose queue grows, OLIA bringing a congested
// path down to two packets) keeps hundreds of KB it took at its former
// rate: they take seconds to go at the new one, the data sent behind
// them on the fast subflow cannot be acknowledged at the connection
// level, the connection's buffer (the subflows' together) fills with it,
// and the fast subflow runs dry. We saw a 10 Mbit/s path carry 0-1
// Mbit/s for seconds that way, the slow subflow holding 300-500 KB it
// sent at 0.6 Mbit/s; and with 8 MiB it held 6 MB. Subflows' buffers
// autotuned from 64 KiB hold a window or two, a slow subflow's queue
// drains in about a second, and the 8 MiB the connection has beyond them
// hold what its fast subflow sends meanwhile (and the receiver's 8 MiB
// what arrives out of order).
const sendBuffers = "8388608 65536 33554432"

var tapIDs atomic.Int64

// mbit is a rate in bit/s.
const mbit = 1e6

// bottleneck returns the parameters of a link of rate, one-way delay and
// a drop-tail queue of queueBDP times its bandwidth-delay product (RTT
// twice the delay).
func bottleneck(rate float64, delay time.Duration, queueBDP float64) linkemu.Params {
	bdp := rate / 8 * (2 * delay).Seconds()
	return linkemu.Params{Rate: rate, Delay: delay, QueueBytes: max(int(queueBDP*bdp), 3*1514)}
}

func newRig(t *testing.T, bottlenecks []linkemu.Params, route []int, subflows int) *rig {
	t.Helper()
	n := testnet.New(t)
	rg := &rig{t: t, cli: n.Node("cli"), r: n.Node("r"), srv: n.Node("srv")}
	rg.nextPort.Store(5000)
	em, err := linkemu.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := em.Close(); err != nil {
			t.Errorf("close emulator: %v", err)
		}
	})
	rg.r.EnableForwarding()
	lo, err := rg.srv.Netlink().LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	addAddr(t, rg.srv, lo, srvAddr+"/32")
	for j, p := range bottlenecks {
		id := tapIDs.Add(1)
		cfg := linkemu.LinkConfig{
			A:  linkemu.Endpoint{Namespace: rg.r.Name(), Name: fmt.Sprintf("%s-c%da", testenv.Prefix, id)},
			B:  linkemu.Endpoint{Namespace: rg.srv.Name(), Name: fmt.Sprintf("%s-c%db", testenv.Prefix, id)},
			AB: p, BA: p, Seed: uint64(id),
		}
		l, err := em.AddLink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rg.bottlenecks = append(rg.bottlenecks, l)
		for _, e := range []struct {
			nd   *testnet.Node
			name string
			addr string
		}{{rg.r, cfg.A.Name, fmt.Sprintf("10.77.%d.1/24", 101+j)}, {rg.srv, cfg.B.Name, fmt.Sprintf("10.77.%d.2/24", 101+j)}} {
			dev, err := e.nd.Netlink().LinkByName(e.name)
			if err != nil {
				t.Fatal(err)
			}
			addAddr(t, e.nd, dev, e.addr)
		}
	}
	for i, j := range route {
		k := i + 1
		n.Link(rg.cli, rg.r, fmt.Sprintf("10.77.%d.1/24", k), fmt.Sprintf("10.77.%d.2/24", k))
		gwR := fmt.Sprintf("10.77.%d.2", 101+j)
		gwS := fmt.Sprintf("10.77.%d.1", 101+j)
		// Client: address k leaves through its own veth.
		addRule(t, rg.cli, fmt.Sprintf("10.77.%d.1/32", k), 10+k, srvAddr+"/32", fmt.Sprintf("10.77.%d.2", k))
		// Router: what comes from address k takes bottleneck j.
		addRule(t, rg.r, fmt.Sprintf("10.77.%d.0/24", k), 10+k, srvAddr+"/32", gwR)
		// Server: the answers to address k go back the same way.
		rg.srv.AddRoute(fmt.Sprintf("10.77.%d.0/24", k), gwS)
	}
	rg.cli.AddRoute(srvAddr+"/32", "10.77.1.2")
	for _, nd := range []*testnet.Node{rg.cli, rg.srv} {
		// Send buffers autotuned from 64 KiB (a TCP sender's grows to
		// about twice its window), 8 MiB more for an MPTCP connection
		// than its subflows' (sendBuffers), receive buffers of 8 MiB
		// from the start: the congestion windows limit the senders, not
		// the socket buffers.
		nd.SetSysctl("net.ipv4.tcp_wmem", sendBuffers)
		nd.SetSysctl("net.ipv4.tcp_rmem", "4096 8388608 33554432")
		nd.SetSysctl("net.ipv4.tcp_no_metrics_save", "1")
		nd.SetSysctl("net.ipv4.tcp_congestion_control", "reno") // never bbr by accident
		c := mptcpClient(t, nd)
		if err := c.SetLimits(mptcp.Limits{Subflows: 8, AddAddrAccepted: 8}); err != nil {
			t.Fatal(err)
		}
	}
	c := mptcpClient(t, rg.cli)
	for k := 2; k <= subflows; k++ {
		dev, err := rg.cli.Netlink().LinkByIndex(ifindexOf(t, rg.cli, fmt.Sprintf("10.77.%d.1", k)))
		if err != nil {
			t.Fatal(err)
		}
		a := mptcp.Addr{ID: uint8(k), IP: netip.MustParseAddr(fmt.Sprintf("10.77.%d.1", k)), IfIndex: dev.Attrs().Index, Flags: mptcp.FlagSubflow}
		if err := c.AddEndpoint(a); err != nil {
			t.Fatalf("add endpoint %v: %v", a, err)
		}
	}
	return rg
}

func addAddr(t *testing.T, nd *testnet.Node, dev netlink.Link, cidr string) {
	t.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.Netlink().AddrAdd(dev, a); err != nil {
		t.Fatalf("add %s in %s: %v", cidr, nd.Name(), err)
	}
}

// addRule sends what comes from src to dst through gw, with a routing
// rule and a table of its own.
func addRule(t *testing.T, nd *testnet.Node, src string, table int, dst, gw string) {
	t.Helper()
	_, from, err := net.ParseCIDR(src)
	if err != nil {
		t.Fatal(err)
	}
	rule := netlink.NewRule()
	rule.Src = from
	rule.Table = table
	rule.Priority = 100 + table
	if err := nd.Netlink().RuleAdd(rule); err != nil {
		t.Fatalf("rule from %s in %s: %v", src, nd.Name(), err)
	}
	_, to, _ := net.ParseCIDR(dst)
	r := netlink.Route{Dst: to, Gw: net.ParseIP(gw), Table: table, LinkIndex: ifindexOf(t, nd, "")}
	hops, err := nd.Netlink().RouteGet(net.ParseIP(gw))
	if err != nil || len(hops) == 0 {
		t.Fatalf("gateway %s unreachable in %s: %v", gw, nd.Name(), err)
	}
	r.LinkIndex = hops[0].LinkIndex
	if err := nd.Netlink().RouteAdd(&r); err != nil {
		t.Fatalf("route %s via %s table %d in %s: %v", dst, gw, table, nd.Name(), err)
	}
}

// ifindexOf is the interface that has addr in nd (0 for "").
func ifindexOf(t *testing.T, nd *testnet.Node, addr string) int {
	t.Helper()
	if addr == "" {
		return 0
	}
	addrs, err := nd.Netlink().AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.IP.String() == addr {
			return a.LinkIndex
		}
	}
	t.Fatalf("no interface with %s in %s", addr, nd.Name())
	return 0
}

func mptcpClient(t *testing.T, nd *testnet.Node) *mptcp.Client {
	t.Helper()
	var c *mptcp.Client
	if err := nd.Do(func() (err error) { c, err = mptcp.Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flow is a bulk transfer from the client to the server that the sender
// keeps window-limited: its socket buffers are far larger than any window
// of the rig (tcp_wmem up to 32 MiB, set in newRig) and a goroutine writes
// without pause, so the socket always has data queued. The receiver
// counts what arrives.
type flow struct {
	name      string
	multipath bool
	conn      net.Conn
	srv       net.Conn
	received  atomic.Int64
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

// startFlow opens a flow from client address k with congestion control cc,
// over MPTCP or plain TCP.
func (rg *rig) startFlow(name, cc string, multipath bool, k int) *flow {
	rg.t.Helper()
	return rg.start(name, cc, multipath, k, false)
}

// startPaced opens an MPTCP connection that sends 4 KiB every 200 ms:
// enough ACKs to run the congestion control, little load.
func (rg *rig) startPaced(name, cc string, k int) *flow {
	rg.t.Helper()
	return rg.start(name, cc, true, k, true)
}

func (rg *rig) start(name, cc string, multipath bool, k int, paced bool) *flow {
	rg.t.Helper()
	port := int(rg.nextPort.Add(1))
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(multipath)
	var ln net.Listener
	if err := rg.srv.Do(func() (err error) {
		ln, err = lc.Listen(context.Background(), "tcp4", fmt.Sprintf("%s:%d", srvAddr, port))
		return err
	}); err != nil {
		rg.t.Fatal(err)
	}
	f := &flow{name: name, multipath: multipath}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	accepted := make(chan net.Conn, 1)
	// The listener stays open while the flow runs: MP_JOIN SYNs go to it.
	rg.t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("10.77.%d.1", k))},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("set congestion control %s: %w", cc, serr)
			}
			return nil
		}}
	d.SetMultipathTCP(multipath)
	var err error
	if err = rg.cli.Do(func() (err error) {
		f.conn, err = d.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", srvAddr, port))
		return err
	}); err != nil {
		cancel()
		rg.t.Fatalf("flow %s: %v", name, err)
	}
	srv, ok := <-accepted
	if !ok {
		cancel()
		rg.t.Fatalf("flow %s: accept failed", name)
	}
	f.srv = srv
	f.done.Add(2)
	go func() { // receiver
		defer f.done.Done()
		buf := make([]byte, 256<<10)
		for {
			n, err := srv.Read(buf)
			f.received.Add(int64(n))
			if err != nil {
				srv.Close()
				return
			}
		}
	}()
	go func() { // sender
		defer f.done.Done()
		buf := make([]byte, 256<<10)
		if paced {
			buf = buf[:4<<10]
		}
		for ctx.Err() == nil {
			if _, err := f.conn.Write(buf); err != nil {
				return
			}
			if paced {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}()
	rg.t.Cleanup(f.stop)
	return f
}

// stop ends the flow at once, both ends, and waits for its goroutines:
// the sender's buffer (megabytes, autotuned) is dropped, not sent.
func (f *flow) stop() {
	f.cancel()
	if tc, ok := f.conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	f.conn.Close()
	f.srv.Close()
	f.done.Wait()
}

// fullInfo reads the sender's MPTCP_FULL_INFO.
func (f *flow) fullInfo() (*mptcp.FullInfo, error) {
	sc, ok := f.conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a syscall.Conn")
	}
	return mptcp.ReadFullInfo(sc)
}

// sockStat is what the kernel says of one of a flow's TCP sockets at the
// sender (TCP_INFO): a TCP flow's own, or a subflow of an MPTCP flow.
type sockStat struct {
	addr               int    // the client address's third byte
	acked              uint64 // bytes
	dataOut            uint32 // data segments sent, retransmissions included
	segsIn             uint32 // segments received: the ACKs
	retrans            uint32 // segments retransmitted
	busy, sndbuf, rwnd time.Duration
	cwnd               uint32
	srtt               time.Duration
	recovery           bool // in fast recovery, or recovering from a timeout
}

// sockets reads the flow's sockets: its subflows' (MPTCP_FULL_INFO), or
// the TCP connection's (TCP_INFO).
func (f *flow) sockets() ([]sockStat, error) {
	if f.multipath {
		fi, err := f.fullInfo()
		if err != nil {
			return nil, err
		}
		var out []sockStat
		for _, sf := range fi.Subflows {
			ti := sf.TCP
			out = append(out, sockStat{addr: int(sf.Local.Addr().As4()[2]), acked: ti.BytesAcked,
				dataOut: ti.DataSegsOut, segsIn: ti.SegsIn, retrans: ti.TotalRetrans,
				busy: ti.BusyTime, sndbuf: ti.SndbufLimited, rwnd: ti.RwndLimited,
				cwnd: ti.SndCwnd, srtt: ti.RTT, recovery: ti.CAState >= caRecovery})
		}
		return out, nil
	}
	tc, ok := f.conn.(*net.TCPConn)
	if !ok {
		return nil, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var ti *unix.TCPInfo
	if cerr := raw.Control(func(fd uintptr) { ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, fmt.Errorf("TCP_INFO: %w", err)
	}
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	return []sockStat{{addr: int(tc.LocalAddr().(*net.TCPAddr).IP.To4()[2]), acked: ti.Bytes_acked,
		dataOut: ti.Data_segs_out, segsIn: ti.Segs_in, retrans: ti.Total_retrans,
		busy: us(ti.Busy_time), sndbuf: us(ti.Sndbuf_limited), rwnd: us(ti.Rwnd_limited),
		cwnd: ti.Snd_cwnd, srtt: us(uint64(ti.Rtt)), recovery: ti.Ca_state >= caRecovery}}, nil
}

// caRecovery is TCP_CA_Recovery; TCP_CA_Loss, after a timeout, follows.
const caRecovery = 3

// waitGone waits until the client's MPTCP connections are gone: a closed
// MPTCP connection lingers until its DATA_FIN is acknowledged, longer
// when it lost packets (net.mptcp.close_timeout bounds it at 60 s), and
// keeps its subflows, unhashed, until then.
func (rg *rig) waitGone() {
	rg.t.Helper()
	start := time.Now()
	var left int
	if !waitFor(90*time.Second, func() bool {
		var conns []mptcp.Connection
		var subs []mptcp.Subflow
		if err := rg.cli.Do(func() (err error) {
			if conns, err = mptcp.Connections(); err == nil {
				subs, err = mptcp.Subflows()
			}
			return err
		}); err != nil {
			rg.t.Fatal(err)
		}
		left = 0
		for _, c := range conns {
			if !c.Listener {
				left++
			}
		}
		for _, s := range subs {
			if s.State != tcpTimeWait {
				left++
			}
		}
		return left == 0
	}) {
		rg.t.Fatalf("%d MPTCP sockets still open 90 s after their connections closed", left)
	}
	if d := time.Since(start); d > 5*time.Second {
		rg.t.Logf("the closed connections took %v to go", d.Round(time.Second))
	}
}

const tcpTimeWait = 6
