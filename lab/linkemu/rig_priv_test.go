package linkemu

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var tapCounter atomic.Int64

// Addresses of the two ends of a rig's link.
const (
	addrA = "10.9.0.1"
	addrB = "10.9.0.2"
)

// rig is two namespaces, a and b, joined by one emulated link.
type rig struct {
	a, b *testnet.Node
	em   *Emulator
	link *Link
}

// newRig builds the rig with p in both directions.
func newRig(t testing.TB, p Params) *rig {
	t.Helper()
	n := testnet.New(t)
	r := &rig{a: n.Node("a"), b: n.Node("b")}
	em, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.em = em
	// Registered after testnet's cleanup, so it runs before: the TAPs
	// go before their namespaces.
	t.Cleanup(func() {
		if err := em.Close(); err != nil {
			t.Errorf("close emulator: %v", err)
		}
	})
	id := tapCounter.Add(1)
	cfg := LinkConfig{
		A:    Endpoint{Namespace: r.a.Name(), Name: fmt.Sprintf("%s-t%da", testenv.Prefix, id)},
		B:    Endpoint{Namespace: r.b.Name(), Name: fmt.Sprintf("%s-t%db", testenv.Prefix, id)},
		AB:   p,
		BA:   p,
		Seed: 1,
	}
	if r.link, err = em.AddLink(cfg); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		nd   *testnet.Node
		name string
		addr string
	}{{r.a, cfg.A.Name, addrA}, {r.b, cfg.B.Name, addrB}} {
		l, err := e.nd.Netlink().LinkByName(e.name)
		if err != nil {
			t.Fatalf("tap %s not in %s: %v", e.name, e.nd.Name(), err)
		}
		a, _ := netlink.ParseAddr(e.addr + "/24")
		if err := e.nd.Netlink().AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// udpPair opens a socket in b and one in a that sends to it.
func (r *rig) udpPair(t testing.TB) (from *net.UDPConn, to *net.UDPConn) {
	t.Helper()
	srv, err := r.b.ListenUDP("udp4", addrB+":0")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := r.a.ListenUDP("udp4", addrA+":0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.SetWriteBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	return cli, srv
}

// echo answers every datagram on srv until it is closed.
func echo(srv *net.UDPConn) {
	buf := make([]byte, 2000)
	for {
		n, addr, err := srv.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		srv.WriteToUDPAddrPort(buf[:n], addr)
	}
}

// rtts measures n round trips of small datagrams, one at a time.
func rtts(t testing.TB, cli *net.UDPConn, to net.Addr, n int) []time.Duration {
	t.Helper()
	buf := make([]byte, 64)
	var out []time.Duration
	for i := range n {
		start := time.Now()
		if _, err := cli.WriteTo(buf, to); err != nil {
			t.Fatal(err)
		}
		cli.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := cli.ReadFrom(buf); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		out = append(out, time.Since(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// receiver counts the datagrams arriving on srv and when each did.
type receiver struct {
	count atomic.Int64
	times chan time.Time
}

// receive counts the datagrams arriving on srv and records when the kernel
// received each (SO_TIMESTAMPNS), so that a late-scheduled reading
// goroutine does not move the arrival times.
func receive(t testing.TB, srv *net.UDPConn) *receiver {
	t.Helper()
	rc := &receiver{times: make(chan time.Time, 100000)}
	raw, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_TIMESTAMPNS: %v %v", err, serr)
	}
	go func() {
		buf := make([]byte, 2000)
		oob := make([]byte, 128)
		for {
			_, oobn, _, _, err := srv.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			rc.count.Add(1)
			select {
			case rc.times <- kernelTime(oob[:oobn]):
			default:
			}
		}
	}()
	return rc
}

// kernelTime is the SCM_TIMESTAMPNS in oob, or now if there is none.
func kernelTime(oob []byte) time.Time {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS &&
			len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix())
		}
	}
	return time.Now()
}

// quiet is how long settle waits for the next datagram before it takes
// the count as final: far beyond the gaps of the tests' bursts (a
// millisecond), and beyond what a loaded machine keeps the emulator's
// loop or the receiving goroutine waiting.
const quiet = 300 * time.Millisecond

// settle waits until the receiver's count has not moved for quiet.
func (rc *receiver) settle() int64 {
	last := rc.count.Load()
	for {
		time.Sleep(quiet)
		n := rc.count.Load()
		if n == last {
			return n
		}
		last = n
	}
}

// await waits until n datagrams in all have arrived.
func (rc *receiver) await(t testing.TB, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); rc.count.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d datagrams arrived in 5 s", rc.count.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// drain returns the arrival times received so far.
func (rc *receiver) drain() []time.Time {
	var ts []time.Time
	for {
		select {
		case t := <-rc.times:
			ts = append(ts, t)
		default:
			return ts
		}
	}
}

// send writes n datagrams of size bytes, pausing every burst datagrams
// so that neither the socket nor the link's queue overflows.
func send(t testing.TB, cli *net.UDPConn, to net.Addr, n, size, burst int, pause time.Duration) {
	t.Helper()
	buf := make([]byte, size)
	for i := range n {
		if _, err := cli.WriteTo(buf, to); err != nil {
			t.Fatal(err)
		}
		if burst > 0 && i%burst == burst-1 {
			time.Sleep(pause)
		}
	}
}

// iperf3 measures a TCP transfer from a to b with cubic (the kernel's
// default here is bbr, and tests must say what they measure), leaving out
// the first second, and returns the goodput in bit/s. It runs as its own
// processes so that the traffic does not compete with the emulator's loop
// for the test binary's Go scheduler.
func (r *rig) iperf3(t testing.TB, seconds int) float64 {
	t.Helper()
	bin := testenv.RequireTool(t, "iperf3")
	port := fmt.Sprint(20000 + tapCounter.Add(1))
	srv := r.b.Start(t, bin, "-s", "-1", "-B", addrB, "-p", port)
	defer srv.Stop()
	var out string
	var err error
	for range 50 { // until the server listens
		out, err = r.a.Exec(t, bin, "-c", addrB, "-p", port, "-C", "cubic", "-O", "1",
			"-t", fmt.Sprint(seconds), "-J")
		// iperf3 3.12 -J may exit 0 with the refusal in its JSON.
		if !strings.Contains(out, "Connection refused") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var res struct {
		End struct {
			Received struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			Congestion string `json:"sender_tcp_congestion"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.End.Congestion != "cubic" {
		t.Fatalf("iperf3 sent with %q, want cubic:\n%s", res.End.Congestion, out)
	}
	return res.End.Received.BitsPerSecond
}
