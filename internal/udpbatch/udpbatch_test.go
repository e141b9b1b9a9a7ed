package udpbatch

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func listen(t *testing.T, addr string, spin time.Duration) (*net.UDPConn, *Conn) {
	t.Helper()
	network := "udp4"
	if netip.MustParseAddrPort(addr).Addr().Is6() {
		network = "udp6"
	}
	u, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	c, err := New(u, 8, 64, spin)
	if err != nil {
		t.Fatal(err)
	}
	return u, c
}

// A batch written by one Conn is read by another with each datagram's
// payload and source, in both families.
func TestRoundTrip(t *testing.T) {
	for _, local := range []string{"127.0.0.1:0", "[::1]:0"} {
		a, ca := listen(t, local, 0)
		b, cb := listen(t, local, 50*time.Microsecond)
		aAddr := a.LocalAddr().(*net.UDPAddr).AddrPort()
		bAddr := b.LocalAddr().(*net.UDPAddr).AddrPort()
		var dsts []netip.AddrPort
		var payloads [][]byte
		for i := range 13 { // more than one batch of 8
			dsts = append(dsts, bAddr)
			payloads = append(payloads, []byte(fmt.Sprintf("datagram %d", i)))
		}
		if err := ca.Write(dsts, payloads); err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < 13 {
			n, err := cb.Read()
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				p, from, trunc := cb.Datagram(i)
				if !bytes.Equal(p, payloads[got]) || from != aAddr || trunc {
					t.Fatalf("%s: datagram %d = %q from %s (truncated %v)", local, got, p, from, trunc)
				}
				got++
			}
		}
	}
}

func TestTruncatedAndFamily(t *testing.T) {
	a, _ := listen(t, "127.0.0.1:0", 0)
	_, cb := listen(t, "127.0.0.1:0", 0)
	big := bytes.Repeat([]byte{1}, 100) // the buffers hold 64
	if _, err := a.WriteToUDPAddrPort(big, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), cb0Port(t, cb))); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Read(); err != nil {
		t.Fatal(err)
	}
	if p, _, trunc := cb.Datagram(0); !trunc || len(p) != 64 {
		t.Errorf("a 100-byte datagram in 64-byte buffers: %d bytes, truncated %v", len(p), trunc)
	}
	if err := cb.Write([]netip.AddrPort{netip.MustParseAddrPort("[2001:db8::1]:1")}, [][]byte{{1}}); err == nil {
		t.Error("an IPv4 socket sent to an IPv6 address")
	}
}

// cb0Port finds the port of a Conn's socket through its raw connection.
func cb0Port(t *testing.T, c *Conn) uint16 {
	t.Helper()
	var port uint16
	c.raw.Control(func(fd uintptr) {
		sa, err := getsockname(int(fd))
		if err != nil {
			t.Fatal(err)
		}
		port = sa
	})
	return port
}

// Closing the socket wakes a Read parked on it.
func TestCloseUnblocksRead(t *testing.T) {
	u, c := listen(t, "127.0.0.1:0", 0)
	done := make(chan error)
	go func() {
		_, err := c.Read()
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	u.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
}

func TestNoAllocations(t *testing.T) {
	_, ca := listen(t, "127.0.0.1:0", 0)
	b, cb := listen(t, "127.0.0.1:0", 0)
	dst := []netip.AddrPort{b.LocalAddr().(*net.UDPAddr).AddrPort()}
	payload := [][]byte{[]byte("ping")}
	n := testing.AllocsPerRun(100, func() {
		if err := ca.Write(dst, payload); err != nil {
			t.Fatal(err)
		}
		if _, err := cb.Read(); err != nil {
			t.Fatal(err)
		}
		cb.Datagram(0)
	})
	if n != 0 {
		t.Errorf("a write and a read allocate %.1f times", n)
	}
}

// Read polls an empty socket only after a read that brought at least a
// quarter of a batch: a lighter load parks the loop at once.
func TestSpinsOnlyWhenBusy(t *testing.T) {
	a, _ := listen(t, "127.0.0.1:0", 0)
	b, cb := listen(t, "127.0.0.1:0", time.Millisecond) // batches of 8: busy from 2
	dst := b.LocalAddr().(*net.UDPAddr).AddrPort()
	for _, tc := range []struct{ send, got int }{{1, 1}, {3, 3}, {1, 1}, {8, 8}} {
		for range tc.send {
			if _, err := a.WriteToUDPAddrPort([]byte("x"), dst); err != nil {
				t.Fatal(err)
			}
		}
		n, err := cb.Read()
		if err != nil || n != tc.got {
			t.Fatalf("Read = %d, %v; want %d", n, err, tc.got)
		}
		if want := tc.got >= 2; cb.busy() != want {
			t.Errorf("after a read of %d: busy %v, want %v", n, cb.busy(), want)
		}
	}
}

// SetBuffers gives a socket read otherwise (the bench's reference server)
// the buffers it gives a Conn's: as root beyond net.core's limits, else
// up to them.
func TestSetBuffers(t *testing.T) {
	u, c := listen(t, "127.0.0.1:0", 0)
	v, _ := listen(t, "127.0.0.1:0", 0)
	if err := c.SetBuffers(ServerBuffer); err != nil {
		t.Fatal(err)
	}
	if err := SetBuffers(v, ServerBuffer); err != nil {
		t.Fatal(err)
	}
	size := func(u *net.UDPConn) (rcv, snd int) {
		raw, err := u.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		raw.Control(func(fd uintptr) {
			rcv, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
			snd, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		})
		return rcv, snd
	}
	cr, cs := size(u)
	vr, vs := size(v)
	if cr != vr || cs != vs || cr == 0 {
		t.Errorf("buffers %d and %d through a Conn, %d and %d without", cr, cs, vr, vs)
	}
}
