package e2e

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
)

// etr is a registering client built on the lisp package, standing in for
// the xTR role until lispd has it: it registers EID-prefixes with a
// map-server, checks the Map-Notify, refreshes the registration every
// second as an ETR does every minute, and answers the Map-Requests a
// map-server forwards to it. Its Map-Registers carry the time as nonce,
// as lispd's xTRs send them, and leave in the order of their nonces: the
// map-server refuses one older than the last it took.
type etr struct {
	t    testing.TB
	conn *net.UDPConn
	ms   netip.AddrPort
	key  []byte

	sending sync.Mutex
	stamps  control.TimeNonces

	mu       sync.Mutex
	mappings []lisp.MapRecord // what it answers forwarded Map-Requests with
	waiting  []uint64         // nonces of the Map-Registers that awaited a Map-Notify
	notifies chan *lisp.MapNotify
	answered int
}

// newETR listens on addr (port 4342 to receive forwarded Map-Requests, or
// port 0 for an ETR that only registers) in nd.
func newETR(t testing.TB, nd *testnet.Node, addr string, ms netip.AddrPort, key string) *etr {
	t.Helper()
	conn, err := nd.ListenUDP("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &etr{t: t, conn: conn, ms: ms, key: []byte(key), notifies: make(chan *lisp.MapNotify, 16)}
	go e.serve()
	return e
}

// register sends a Map-Register for the records, waits for its
// Map-Notify, and refreshes the registration every second from then on.
func (e *etr) register(m *lisp.MapRegister) *lisp.MapNotify {
	e.t.Helper()
	n := e.registerOnce(m)
	go e.refresh(*m)
	return n
}

// registerOnce registers without refreshing: the registration expires.
func (e *etr) registerOnce(m *lisp.MapRegister) *lisp.MapNotify {
	e.t.Helper()
	e.mu.Lock()
	e.mappings = append(e.mappings, m.Records...)
	e.mu.Unlock()
	m.WantMapNotify = true
	var tries []uint64
	for try := 0; try < 3; try++ {
		if err := e.stampAndSend(m, true); err != nil {
			e.t.Fatal(err)
		}
		tries = append(tries, m.Nonce)
		timeout := time.After(2 * time.Second)
	wait:
		for {
			select {
			case n := <-e.notifies:
				if slices.Contains(tries, n.Nonce) {
					return n
				} // a late one of an earlier registration
			case <-timeout:
				break wait
			}
		}
	}
	e.t.Fatalf("no Map-Notify from %s", e.ms)
	return nil
}

func (e *etr) awaited(nonce uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.waiting, nonce)
}

// acknowledge answers a Map-Notify that acknowledges no Map-Register of
// this ETR, news of a merged set it is part of, with a Map-Notify-Ack.
func (e *etr) acknowledge(n *lisp.MapNotify, to netip.AddrPort) {
	b, err := (&lisp.MapNotifyAck{MapNotify: *n}).AppendSigned(nil, e.key)
	if err == nil {
		_, err = e.conn.WriteToUDPAddrPort(b, to)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		e.t.Errorf("etr: Map-Notify-Ack: %v", err)
	}
}

// stampAndSend gives m the nonce of now, signs it and sends it; with
// await, its Map-Notify is awaited.
func (e *etr) stampAndSend(m *lisp.MapRegister, await bool) error {
	if m.Auth.Algorithm == lisp.AuthNone {
		m.Auth.Algorithm = lisp.AuthHMACSHA256
	}
	e.sending.Lock()
	defer e.sending.Unlock()
	m.Nonce = e.stamps.Next(time.Now())
	if await {
		e.mu.Lock()
		e.waiting = append(e.waiting, m.Nonce)
		e.mu.Unlock()
	}
	m.Auth.Data = nil
	b, err := m.AppendSigned(nil, e.key)
	if err != nil {
		return err
	}
	_, err = e.conn.WriteToUDPAddrPort(b, e.ms)
	return err
}

// refresh re-sends m, without asking for a Map-Notify, every second until
// the socket closes at the end of the test.
func (e *etr) refresh(m lisp.MapRegister) {
	m.WantMapNotify = false
	for range time.Tick(time.Second) {
		if err := e.stampAndSend(&m, false); err != nil {
			return // closed: the test is over
		}
	}
}

// send sends a Map-Register and does not wait: for refused ones.
func (e *etr) send(b []byte) {
	if _, err := e.conn.WriteToUDPAddrPort(b, e.ms); err != nil {
		e.t.Fatal(err)
	}
}

func (e *etr) serve() {
	buf := make([]byte, 65535)
	for {
		n, from, err := e.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				e.t.Errorf("etr: %v", err)
			}
			return
		}
		m, err := lisp.Parse(buf[:n])
		if err != nil {
			e.t.Errorf("etr: from %s: %v", from, err)
			continue
		}
		switch m := m.(type) {
		case *lisp.MapNotify:
			if err := lisp.Verify(buf[:n], e.key); err != nil {
				e.t.Errorf("etr: Map-Notify from %s does not verify: %v", from, err)
				continue
			}
			if e.awaited(m.Nonce) {
				e.notifies <- m
			} else {
				e.acknowledge(m, from)
			}
		case *lisp.ECM:
			e.answer(m)
		}
	}
}

// answer replies to a forwarded Map-Request as the authoritative ETR,
// directly to the ITR.
func (e *etr) answer(ecm *lisp.ECM) {
	req, ok := ecm.Message.(*lisp.MapRequest)
	if !ok || !ecm.ToETR {
		e.t.Errorf("etr: unexpected ECM %s", ecm)
		return
	}
	e.mu.Lock()
	reply := &lisp.MapReply{Nonce: req.Nonce}
	for _, rec := range e.mappings {
		rec.Authoritative = true
		reply.Records = append(reply.Records, rec)
	}
	e.answered++
	e.mu.Unlock()
	b, err := reply.AppendBinary(nil)
	if err != nil {
		e.t.Error(err)
		return
	}
	to := netip.AddrPortFrom(req.ITRRLOCs[0].IP(), ecm.Source.Port())
	if _, err := e.conn.WriteToUDPAddrPort(b, to); err != nil {
		e.t.Errorf("etr: reply to %s: %v", to, err)
	}
}

func (e *etr) answers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.answered
}
