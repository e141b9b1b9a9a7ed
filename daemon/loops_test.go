package daemon_test

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

const loops = 4

func udpSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// With several loops, the kernel spreads the peers over their sockets,
// and every peer gets its answers from the address it asked.
func TestLoopsSpreadPeers(t *testing.T) {
	d, sock := startDaemon(t, "", daemon.WithLoops(loops))
	addr := d.Addrs()[0]
	register(t, addr, &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{{
		TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{{Priority: 1, Weight: 1, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")}},
	}}})
	const peers = 64
	var wg sync.WaitGroup
	for i := range peers {
		c := udpSocket(t)
		wg.Go(func() {
			local := c.LocalAddr().(*net.UDPAddr).AddrPort()
			ecm, err := lig.NewRequest(lisp.MustParseAddress("10.1.0.1"), local, uint64(i+1))
			if err != nil {
				t.Error(err)
				return
			}
			b, err := ecm.AppendBinary(nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.WriteToUDPAddrPort(b, addr); err != nil {
				t.Error(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 1500)
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Errorf("peer %d: no Map-Reply: %v", i, err)
				return
			}
			var reply lisp.MapReply
			if err := reply.DecodeFromBytes(buf[:n]); err != nil || reply.Nonce != uint64(i+1) || from != addr {
				t.Errorf("peer %d: %v from %s: %s", i, err, from, &reply)
			}
		})
	}
	wg.Wait()
	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	busy := 0
	for _, n := range st.Counters.ByLoop {
		sum += n
		if n > 0 {
			busy++
		}
	}
	t.Logf("datagrams by loop: %v", st.Counters.ByLoop)
	// 64 peers on one loop of 4 by chance: 4^-63.
	if st.Loops != loops || len(st.Counters.ByLoop) != loops || sum != 1+peers || busy < 2 {
		t.Errorf("%d loops received %v", st.Loops, st.Counters.ByLoop)
	}
}

// One xTR's Map-Registers from one address and port reach one loop, in
// the order sent: anti-replay accepts each of a quick succession of them.
// From many ports at once they reach several loops, in any order: the
// map-server accepts only those newer than the last it accepted, never
// one nonce twice, and keeps the newest.
func TestLoopsKeepOneXTRsOrder(t *testing.T) {
	d, sock := startDaemon(t, "", daemon.WithLoops(loops))
	addr := d.Addrs()[0]
	xtrID := &lisp.XTRID{ID: [16]byte{0x42}, SiteID: 7}
	first := control.TimeNonce(time.Now())
	sign := func(nonce uint64) []byte {
		m := &lisp.MapRegister{ProxyReply: true, WantMapNotify: true, Nonce: nonce, XTRID: xtrID,
			Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
				Locators: []lisp.Locator{{Priority: 1, Weight: 1, Reachable: true,
					Address: lisp.IPAddress(netip.AddrFrom4([4]byte{192, 0, 2, byte(nonce - first)}))}}}}}
		b, err := m.AppendSigned(nil, []byte(siteKey))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	notifies := func(c *net.UDPConn, want int) int {
		got := 0
		buf := make([]byte, 1500)
		for got < want {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
				break
			}
			got++
		}
		return got
	}

	const inOrder = 60
	c := udpSocket(t)
	for i := range inOrder {
		if _, err := c.WriteToUDPAddrPort(sign(first+uint64(i)), addr); err != nil {
			t.Fatal(err)
		}
	}
	if got := notifies(c, inOrder); got != inOrder {
		t.Errorf("%d Map-Notifies for %d Map-Registers sent in order from one port", got, inOrder)
	}
	cs, err := daemon.QueryCounters(sock)
	if err != nil {
		t.Fatal(err)
	}
	if cs.MapRegisters["accepted"] != inOrder {
		t.Errorf("from one port: %v", cs.MapRegisters)
	}

	const ports, each = 16, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for p := range ports {
		c := udpSocket(t)
		wg.Go(func() {
			for i := range each {
				if _, err := c.WriteToUDPAddrPort(sign(first+inOrder+uint64(i*ports+p)), addr); err != nil {
					t.Error(err)
				}
			}
			n := notifies(c, each)
			mu.Lock()
			acked += n
			mu.Unlock()
		})
	}
	wg.Wait()
	cs, err = daemon.QueryCounters(sock)
	if err != nil {
		t.Fatal(err)
	}
	accepted := cs.MapRegisters["accepted"] - inOrder
	if accepted == 0 || accepted+cs.MapRegisters["replayed"] != ports*each || uint64(acked) != accepted {
		t.Errorf("from %d ports: %d accepted, %d Map-Notifies: %v", ports, accepted, acked, cs.MapRegisters)
	}
	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	last := byte(inOrder + ports*each - 1) // the newest nonce's locator
	regs := st.MapServer.Sites[0].Registrations
	if len(regs) != 1 || len(regs[0].Locators) != 1 || regs[0].Locators[0].Address != netip.AddrFrom4([4]byte{192, 0, 2, last}).String() {
		t.Errorf("registered %+v, want the newest locator 192.0.2.%d", regs, last)
	}
}
