package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// These tests run lispd in the test process on loopback UDP. The
// end-to-end tests across network namespaces are in e2e_priv_test.go.

const siteKey = "site-a-key"

func startDaemon(t *testing.T, extra string, opts ...daemon.Option) (*daemon.Daemon, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "lispd.sock")
	cfg, err := config.Parse([]byte(`
roles: [map-server, map-resolver]
listen: ["127.0.0.1:0"]
control: {socket: ` + sock + `}
map-server:
  sites:
    - name: site-a
      keys: [{id: 0, secret: ` + siteKey + `}]
      eid-prefixes: [{prefix: 10.1.0.0/16}, {prefix: 10.64.0.0/10, accept-more-specifics: true}]
map-resolver: {rate-limit: {per-second: 0}}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(cfg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		d.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d, sock
}

// register sends a signed Map-Register from a new socket and returns the
// Map-Notify that comes back.
func register(t *testing.T, ms netip.AddrPort, m *lisp.MapRegister) *lisp.MapNotify {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m.Auth.Algorithm = lisp.AuthHMACSHA256
	m.WantMapNotify = true
	m.Nonce = control.TimeNonce(time.Now()) // as lispd's xTRs send it: anti-replay is on
	b, err := m.AppendSigned(nil, []byte(siteKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteToUDPAddrPort(b, ms); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65535)
	n, _, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no Map-Notify: %v", err)
	}
	if err := lisp.Verify(buf[:n], []byte(siteKey)); err != nil {
		t.Fatalf("Map-Notify does not verify: %v", err)
	}
	msg, err := lisp.Parse(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return msg.(*lisp.MapNotify)
}

func query(t *testing.T, mr netip.AddrPort, eid string) *lig.Result {
	t.Helper()
	res, err := lig.Query(context.Background(), netip.MustParseAddr(eid), lig.Options{
		Resolver: mr, Source: netip.MustParseAddr("127.0.0.1"), Tries: 3, Timeout: time.Second,
	})
	if err != nil {
		t.Fatalf("lig %s: %v", eid, err)
	}
	return res
}

func TestRegisterThenLig(t *testing.T) {
	d, sock := startDaemon(t, "")
	addr := d.Addrs()[0]
	elp := lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("198.51.100.1"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("198.51.100.2"), Strict: true},
	}})
	rec := lisp.MapRecord{TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16, Locators: []lisp.Locator{
		{Priority: 1, Weight: 50, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")},
		{Priority: 1, Weight: 50, Reachable: true, Address: elp},
	}}
	m := &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{rec}, XTRID: &lisp.XTRID{ID: [16]byte{0xab}, SiteID: 3}}
	n := register(t, addr, m)
	if n.Nonce != m.Nonce || n.XTRID == nil || n.XTRID.SiteID != 3 {
		t.Errorf("Map-Notify = %s", n)
	}

	res := query(t, addr, "10.1.7.7")
	got := res.Reply.Records[0]
	if len(got.Locators) != 2 || !got.Locators[1].Address.Equal(elp) || got.TTL != 1440 {
		t.Errorf("lig got %s", &got)
	}
	// Outside every site: a negative reply for the gap around the EID.
	neg := query(t, addr, "172.16.0.1").Reply.Records[0]
	if len(neg.Locators) != 0 || neg.Action != lisp.ActionNativelyForward || neg.TTL != 15 {
		t.Errorf("negative reply %s", &neg)
	}

	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	regs := st.MapServer.Sites[0].Registrations
	if len(regs) != 1 || regs[0].EID != "10.1.0.0/16" || len(regs[0].ETRs) != 1 ||
		regs[0].ETRs[0].XTRID != "ab000000000000000000000000000000" || !strings.HasPrefix(regs[0].Locators[1].Address, "elp{") {
		t.Errorf("status: %+v", regs)
	}
	if c := st.Counters; c.MapRegisters["accepted"] != 1 || c.MapNotifies != 1 || c.ReplyMappings != 1 || c.ReplyNegatives != 1 {
		t.Errorf("counters: %+v", c)
	}
}

// A flood of malformed datagrams does not stop the daemon answering
// well-formed requests, during the flood and after it.
func TestMalformedFloodStillAnswers(t *testing.T) {
	d, sock := startDaemon(t, "")
	addr := d.Addrs()[0]
	register(t, addr, &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{{
		TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{{Priority: 1, Weight: 1, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")}},
	}}})
	flooder, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	garbage := [][]byte{
		{0x80, 0, 0, 0, 0x45},            // an ECM cut in its inner header
		{0x10, 0, 0, 0x05},               // a Map-Request cut short
		{0x30, 0, 0, 1, 1, 2, 3},         // a Map-Register cut short
		{0xf0, 0xde, 0xad, 0xbe, 0xef},   // type 15
		[]byte(strings.Repeat("A", 900)), // not LISP at all
	}
	const total = 100_000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range total {
			if _, err := flooder.Write(garbage[i%len(garbage)]); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("flood: %v", err)
				return
			}
		}
	})
	during := query(t, addr, "10.1.0.1")
	wg.Wait()
	after := query(t, addr, "10.1.0.1")
	for _, r := range []*lig.Result{during, after} {
		if len(r.Reply.Records) != 1 || len(r.Reply.Records[0].Locators) != 1 {
			t.Errorf("reply %s", r.Reply)
		}
	}
	// Everything that reached the daemon was counted, by its reason.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := daemon.QueryCounters(sock)
		if err != nil {
			t.Fatal(err)
		}
		refused := c.Malformed + c.MapRegisters["malformed"] + c.Unexpected["Type(15)"] + c.Unexpected["Type(4)"] + c.Unexpected["Map-Request"]
		if refused >= total*9/10 || time.Now().After(deadline) {
			t.Logf("of %d malformed datagrams the daemon counted %d (the rest the kernel dropped, its buffer full)", total, refused)
			if refused == 0 {
				t.Error("no malformed datagram counted")
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestControlSocketRefusesSecondDaemon(t *testing.T) {
	_, sock := startDaemon(t, "")
	cfg, err := config.Parse([]byte("roles: [map-server]\nlisten: [\"127.0.0.1:0\"]\ncontrol: {socket: " + sock + "}\n" +
		"map-server: {sites: [{name: a, keys: [{id: 0, secret: x}], eid-prefixes: [{prefix: 10.9.0.0/16}]}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "another lispd is running") {
		t.Fatalf("second daemon on the same control socket: %v", err)
	}
}

func TestControlMemoryAndErrors(t *testing.T) {
	d, sock := startDaemon(t, "")
	register(t, d.Addrs()[0], &lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{{
		TTL: 3, EID: lisp.MustParseAddress("10.1.0.0"), MaskLen: 16,
	}}})
	m, err := daemon.QueryMemory(sock)
	if err != nil || m.Registrations != 1 || m.HeapAlloc == 0 || m.Sys < m.HeapAlloc {
		t.Errorf("memory = %+v, %v", m, err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(`{"command": "reboot"}` + "\n"))
	reply := make([]byte, 200)
	n, _ := c.Read(reply)
	if !strings.Contains(string(reply[:n]), `unknown command \"reboot\"`) {
		t.Errorf("unknown command answered %q", reply[:n])
	}
}
