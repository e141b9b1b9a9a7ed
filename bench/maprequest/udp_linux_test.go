package maprequest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUDPConnBatches sends a batch to the reference server and checks
// that the replies come back with the kernel's arrival time.
func TestUDPConnBatches(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go ServeEcho(srv, EchoSizes{Reply: 40, Notify: 84})
	c, err := dialUDP(srv.LocalAddr().(*net.UDPAddr).AddrPort(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	reqs, err := newRequests(3, newPrefixes(3), c.local)
	if err != nil {
		t.Fatal(err)
	}
	send := newBatch(maxBatch, reqs.size)
	for i := range 3 {
		b := send.bufs[i][:reqs.size]
		copy(b, reqs.msg(i))
		putNonce(b, uint64(100+i))
		send.point(i, b)
	}
	before := time.Now()
	if n, err := c.send(send, 3); n != 3 || err != nil {
		t.Fatalf("send = %d, %v", n, err)
	}
	recv := newBatch(maxBatch, 2048)
	got := map[uint64]bool{}
	for deadline := time.Now().Add(5 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		if err := c.wait(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n, err := c.recv(recv)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			nonce, _, ok := readReply(recv.received(i))
			at, stamped := recv.arrival(i)
			if !ok || !stamped || at < before.UnixNano() || at > time.Now().UnixNano() {
				t.Errorf("reply %x: nonce ok %v, arrival %v (%v), sent at %v", recv.received(i), ok, time.Unix(0, at), stamped, before)
			}
			got[nonce] = true
		}
	}
	if !got[100] || !got[101] || !got[102] {
		t.Errorf("replies for nonces %v, want 100 to 102", got)
	}
}

// TestRegisterGivesUp checks that the Map-Register phase ends with an
// error when nothing acknowledges, instead of resending forever.
func TestRegisterGivesUp(t *testing.T) {
	defer func(d time.Duration) { stallAfter = d }(stallAfter)
	// Ten times lostAfter: the resends come first however late a busy
	// machine runs the loop.
	stallAfter = 10 * lostAfter
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c, err := dialUDP(silent.LocalAddr().(*net.UDPAddr).AddrPort(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	regs, err := newRegisters(newPrefixes(5))
	if err != nil {
		t.Fatal(err)
	}
	var st registerStats
	err = register(context.Background(), c, regs, 1, 5, 0, 2, &st)
	if err == nil || !strings.Contains(err.Error(), "no Map-Notify for 2.5s, 0 of 4 acknowledged") {
		t.Errorf("register = %v", err)
	}
	if st.resent == 0 {
		t.Errorf("nothing resent after %s", lostAfter)
	}
}

// TestRegisterRange registers a range of the Map-Registers with the
// reference server, which acknowledges them as lispd does.
func TestRegisterRange(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	regs, err := newRegisters(newPrefixes(10))
	if err != nil {
		t.Fatal(err)
	}
	sizes := answerSizes(regs)
	go ServeEcho(srv, sizes)
	c, err := dialUDP(srv.LocalAddr().(*net.UDPAddr).AddrPort(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var st registerStats
	for _, r := range [][2]int{{0, 3}, {3, 10}} {
		if err := register(context.Background(), c, regs, r[0], r[1], 0, 4, &st); err != nil {
			t.Fatal(err)
		}
	}
	if st.acked != 10 || st.notifySize != sizes.Notify || st.elapsed <= 0 {
		t.Errorf("register: %+v, want 10 acknowledged with %d-byte notifies", st, sizes.Notify)
	}
}

// TestUDPConnFlows checks that with several flows each datagram comes
// from the next flow's address, from the socket's port, and that answers
// to those addresses come back.
func TestUDPConnFlows(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const flows = 5
	c, err := dialUDP(srv.LocalAddr().(*net.UDPAddr).AddrPort(), flows)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.local.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("local address %s", c.local)
	}
	send := newBatch(maxBatch, 8)
	for round := range 2 { // 12 datagrams: the flows take turns across sends
		if n, err := c.send(send, 6); n != 6 || err != nil {
			t.Fatalf("send = %d, %v", n, err)
		}
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		for i := range 6 {
			_, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatal(err)
			}
			want := netip.AddrPortFrom(netip.AddrFrom4(flowSource((round*6+i)%flows)), c.local.Port())
			if from != want {
				t.Errorf("datagram %d from %s, want %s", round*6+i, from, want)
			}
			if _, err := srv.WriteToUDPAddrPort([]byte("answer"), from); err != nil {
				t.Fatal(err)
			}
		}
	}
	recv := newBatch(maxBatch, 64)
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < 12 && time.Now().Before(deadline); {
		if err := c.wait(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n, err := c.recv(recv)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if got != 12 {
		t.Errorf("%d answers of 12", got)
	}
	if _, err := dialUDP(netip.MustParseAddrPort("192.0.2.1:4342"), 2); err == nil {
		t.Error("flows to an address that is not loopback")
	}
}

// TestRunDelay checks that a process's run-queue delay adds up its
// threads', the main one's among them.
func TestRunDelay(t *testing.T) {
	b, err := os.ReadFile("/proc/self/schedstat")
	if err != nil {
		t.Skipf("no schedstat: %v", err)
	}
	var run, wait int64
	if _, err := fmt.Sscan(string(b), &run, &wait); err != nil {
		t.Fatal(err)
	}
	if got := runDelay(os.Getpid()); got < time.Duration(wait) {
		t.Errorf("runDelay = %v, below the main thread's %v", got, time.Duration(wait))
	}
	if got := runDelay(-1); got != 0 {
		t.Errorf("runDelay of no process = %v", got)
	}
}
