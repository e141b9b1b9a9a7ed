package udpbatch

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func group(t *testing.T, n int) []*net.UDPConn {
	t.Helper()
	conns, err := ListenGroup("udp4", netip.MustParseAddrPort("127.0.0.1:0"), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// The sockets of a group share one address; each peer's datagrams reach
// one of them, in the order sent, and many peers reach several.
func TestListenGroup(t *testing.T) {
	conns := group(t, 4)
	addr := conns[0].LocalAddr().(*net.UDPAddr).AddrPort()
	for _, c := range conns[1:] {
		if got := c.LocalAddr().(*net.UDPAddr).AddrPort(); got != addr {
			t.Fatalf("group on %s and %s", addr, got)
		}
	}
	const peers, each = 32, 5
	var mu sync.Mutex
	bySource := map[netip.AddrPort][]int{} // what each peer's datagrams said, in the order received
	socketOf := map[netip.AddrPort]int{}   // where each peer's datagrams went
	used := map[int]bool{}
	// Read until every datagram is in (then the others' reads are cut
	// short) or for 10 s: a reader that the busy machine does not run in
	// time must not lose what its socket holds.
	received := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			buf := make([]byte, 64)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				v, _ := strconv.Atoi(string(buf[:n]))
				mu.Lock()
				if s, ok := socketOf[from]; ok && s != i {
					t.Errorf("peer %s reached sockets %d and %d", from, s, i)
				}
				socketOf[from] = i
				used[i] = true
				bySource[from] = append(bySource[from], v)
				if received++; received == peers*each {
					for _, c := range conns {
						c.SetReadDeadline(time.Now())
					}
				}
				mu.Unlock()
			}
		})
	}
	// Sent while the sockets are read, and few: a socket's default
	// receive buffer holds about 90 such datagrams, and 640 overflowed one
	// now and then.
	for range peers {
		p, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := range each {
			if _, err := p.Write([]byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if len(bySource) != peers || len(used) < 2 {
		t.Errorf("%d peers heard on %d sockets", len(bySource), len(used))
	}
	for from, got := range bySource {
		for i, v := range got {
			if v != i {
				t.Errorf("peer %s: datagrams in the order %v", from, got)
				break
			}
		}
	}
}

// A group of one does not share its address, even with a socket that
// asks to (SO_REUSEPORT).
func TestListenGroupOfOne(t *testing.T) {
	one := group(t, 1)[0].LocalAddr()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error { return reusePortRaw(rc) }}
	if c, err := lc.ListenPacket(context.Background(), "udp4", one.String()); err == nil {
		c.Close()
		t.Errorf("a second socket could bind %s", one)
	}
	two := group(t, 2)[0].LocalAddr()
	c, err := lc.ListenPacket(context.Background(), "udp4", two.String())
	if err != nil {
		t.Fatalf("a group of two does not share %s: %v", two, err)
	}
	c.Close()
}
