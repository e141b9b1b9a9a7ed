package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testnet"
)

// The anti-replay of registrations, tried from outside: Map-Registers are
// built here byte by byte as RFC 9301 §5.6 lays them out, signed with
// crypto/hmac, and sent over UDP to the lispd binary in a namespace.

// timeNonce is a Map-Register nonce as lispd's xTRs make it (docs/wire.md):
// Unix seconds in the high 32 bits, the fraction of the second in the low
// 32.
func timeNonce(t time.Time) uint64 {
	return uint64(t.Unix())<<32 | uint64(t.Nanosecond())<<32/uint64(time.Second)
}

// rawRegister is a Map-Register of one EID-record, prefix through one IPv4
// RLOC, with the P and M bits (and a with merge), the nonce, the xTR-ID id
// when it is not 0 (site-ID 0), and HMAC-SHA-256 with key over the whole
// message, its 32 bytes of authentication data taken as zero.
func rawRegister(nonce uint64, prefix, rloc string, id byte, merge bool, key string) []byte {
	p := netip.MustParsePrefix(prefix)
	head := uint32(3)<<28 | 1<<27 | 1<<8 | 1 // Type 3, P, M, 1 record
	if id != 0 {
		head |= 1 << 25 // I
	}
	if merge {
		head |= 1 << 10 // a
	}
	b := binary.BigEndian.AppendUint32(nil, head)
	b = binary.BigEndian.AppendUint64(b, nonce)
	b = append(b, 0, 2, 0, 32)         // Key ID 0, HMAC-SHA-256-128, 32 bytes of data
	b = append(b, make([]byte, 32)...) // the authentication data, zero while hashing
	b = binary.BigEndian.AppendUint32(b, 3)
	b = append(b, 1, byte(p.Bits()), 0x10, 0) // 1 locator, mask-len, ACT 0 and A, reserved
	b = append(b, 0, 0, 0, 1)                 // map-version 0, EID-Prefix-AFI 1 (IPv4)
	b = append(b, p.Addr().AsSlice()...)
	b = append(b, 1, 50, 255, 0, 0, 1, 0, 1) // priority 1, weight 50, not multicast, R; AFI 1
	b = append(b, netip.MustParseAddr(rloc).AsSlice()...)
	if id != 0 {
		b = append(b, id)
		b = append(b, make([]byte, 15+8)...) // the rest of the xTR-ID, site-ID 0
	}
	return signRaw(b, key)
}

// signRaw writes the HMAC-SHA-256 of msg, with its authentication data
// (offset 16, 32 bytes) zeroed, into that data.
func signRaw(msg []byte, key string) []byte {
	clear(msg[16:48])
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(msg)
	copy(msg[16:48], mac.Sum(nil))
	return msg
}

// sharedKey is the secret of sites a and b of the replay tests: the worst
// case, operators reusing one secret.
const sharedKey = "one secret for two sites"

func replayConfig() string {
	return `
roles: [map-server]
listen: ["0.0.0.0"]
log: {level: debug}
metrics: {listen: "127.0.0.1:9342"}
control: {socket: {sock}}
map-server:
  sites:
    - name: a
      keys: [{id: 0, secret: "` + sharedKey + `"}]
      eid-prefixes: [{prefix: 10.1.0.0/16}, {prefix: 10.3.0.0/16}]
    - name: b
      keys: [{id: 0, secret: "` + sharedKey + `"}]
      eid-prefixes: [{prefix: 10.2.0.0/16}]
    - name: random-nonces
      keys: [{id: 0, secret: "` + sharedKey + `"}]
      anti-replay: false
      eid-prefixes: [{prefix: 10.5.0.0/16}]
`
}

// lispdProc is a lispd binary run from a configuration file in a node,
// for as long as the test that made it, unless stopped and started again.
// Its methods take the test or subtest that uses them.
type lispdProc struct {
	owner testing.TB // whose end stops it
	nd    *testnet.Node
	cfg   string
	sock  string
	proc  *testnet.Process
}

func newLispdProc(t *testing.T, nd *testnet.Node, cfg string) *lispdProc {
	dir := t.TempDir()
	l := &lispdProc{owner: t, nd: nd, cfg: filepath.Join(dir, "lispd.yaml"), sock: filepath.Join(dir, "lispd.sock")}
	if err := os.WriteFile(l.cfg, []byte(strings.ReplaceAll(cfg, "{sock}", l.sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start(t)
	return l
}

func (l *lispdProc) start(t testing.TB) {
	t.Helper()
	l.proc = l.nd.Start(l.owner, filepath.Join(bin, "lispd"), "-config", l.cfg)
	waitFor(t, "lispd to answer", func() bool {
		_, err := daemon.QueryStatus(l.sock)
		return err == nil
	})
}

func (l *lispdProc) restart(t testing.TB) {
	t.Helper()
	l.proc.Stop()
	l.start(t)
}

// sendAndCount sends b from c to the map-server at ms and waits until
// lispd counted it: it returns the result ("accepted" or the reason).
func (l *lispdProc) sendAndCount(t testing.TB, c *net.UDPConn, ms netip.AddrPort, b []byte) string {
	t.Helper()
	before, err := daemon.QueryCounters(l.sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteToUDPAddrPort(b, ms); err != nil {
		t.Fatal(err)
	}
	var result string
	waitFor(t, "the Map-Register to be counted", func() bool {
		now, err := daemon.QueryCounters(l.sock)
		if err != nil {
			return false
		}
		for r, n := range now.MapRegisters {
			if n > before.MapRegisters[r] {
				result = r
			}
		}
		return result != ""
	})
	return result
}

// registration is what the map-server holds of eid: the locators replies
// carry, and the ETRs with their times and counts (nil if nothing).
func (l *lispdProc) registration(t testing.TB, eid string) *mapserver.RegistrationStatus {
	t.Helper()
	st, err := daemon.QueryStatus(l.sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, site := range st.MapServer.Sites {
		for _, r := range site.Registrations {
			if r.EID == eid {
				return &r
			}
		}
	}
	return nil
}

// locators are the RLOCs registered for eid.
func (l *lispdProc) locators(t testing.TB, eid string) []string {
	t.Helper()
	var rlocs []string
	if r := l.registration(t, eid); r != nil {
		for _, loc := range r.Locators {
			rlocs = append(rlocs, loc.Address)
		}
	}
	return rlocs
}

// TestRegistrationReplay: a captured Map-Register sent again, from the
// ETR's address or another, a reordered one, one signed long ago or far
// ahead, one of another site, and one from before a restart, each leave
// the registration as it was and are counted by reason.
func TestRegistrationReplay(t *testing.T) {
	n := newMappingNet(t)
	l := newLispdProc(t, n.ms, replayConfig())
	ms := netip.MustParseAddrPort("10.0.1.1:4342")
	etr, err := n.etr1.ListenUDP("udp4", "10.0.1.2:0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := n.etr2.ListenUDP("udp4", "10.0.2.2:0")
	if err != nil {
		t.Fatal(err)
	}
	send := func(t *testing.T, c *net.UDPConn, b []byte, want string) {
		t.Helper()
		if got := l.sendAndCount(t, c, ms, b); got != want {
			t.Fatalf("Map-Register counted as %s, want %s", got, want)
		}
	}
	// refused sends b and checks that it is refused for want and that
	// eid's registration did not change, not even its refresh time.
	refused := func(t *testing.T, c *net.UDPConn, b []byte, want, eid string) {
		t.Helper()
		before := fmt.Sprintf("%+v", l.registration(t, eid))
		send(t, c, b, want)
		if after := fmt.Sprintf("%+v", l.registration(t, eid)); after != before {
			t.Errorf("refused as %s, but the registration changed:\n%s\n%s", want, before, after)
		}
	}

	started := time.Now() // lispd answers: it started before
	a := rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.1", 0, false, sharedKey)
	b := rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.2", 0, false, sharedKey)

	t.Run("replay", func(t *testing.T) {
		send(t, etr, a, "accepted")
		send(t, etr, b, "accepted")
		refused(t, etr, a, "replayed", "10.1.0.0/16")
		refused(t, etr, b, "replayed", "10.1.0.0/16") // the latest again: no refresh either
		if got := l.locators(t, "10.1.0.0/16"); !slices.Equal(got, []string{"192.0.2.2"}) {
			t.Errorf("locators %v, want B's", got)
		}
		out, err := n.ms.Exec(t, filepath.Join(bin, "lispd"), "status", "-socket", l.sock)
		if err != nil || !strings.Contains(out, "locator 192.0.2.2") || strings.Contains(out, "locator 192.0.2.1") ||
			!strings.Contains(out, "replayed 2") {
			t.Errorf("lispd status: %v\n%s", err, out)
		}
	})

	t.Run("replay from another address", func(t *testing.T) {
		// No xTR-ID: the address is all that tells ETRs apart, and it is
		// not authenticated; the site's xTRs without one share a sequence.
		refused(t, other, a, "replayed", "10.1.0.0/16")
		refused(t, other, b, "replayed", "10.1.0.0/16")
		// With one.
		x1 := rawRegister(timeNonce(time.Now()), "10.3.0.0/16", "192.0.2.31", 7, false, sharedKey)
		x2 := rawRegister(timeNonce(time.Now()), "10.3.0.0/16", "192.0.2.32", 7, false, sharedKey)
		send(t, etr, x1, "accepted")
		send(t, etr, x2, "accepted")
		refused(t, other, x1, "replayed", "10.3.0.0/16")
		if got := l.locators(t, "10.3.0.0/16"); !slices.Equal(got, []string{"192.0.2.32"}) {
			t.Errorf("locators %v, want the second's", got)
		}
	})

	t.Run("reorder", func(t *testing.T) {
		c := rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.3", 0, false, sharedKey)
		d := rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.4", 0, false, sharedKey)
		send(t, etr, d, "accepted")
		refused(t, etr, c, "replayed", "10.1.0.0/16")
		if got := l.locators(t, "10.1.0.0/16"); !slices.Equal(got, []string{"192.0.2.4"}) {
			t.Errorf("locators %v, want D's", got)
		}
	})

	t.Run("stale and future", func(t *testing.T) {
		for at, want := range map[time.Duration]string{-10 * time.Minute: "stale", 10 * time.Minute: "future"} {
			refused(t, etr, rawRegister(timeNonce(time.Now().Add(at)), "10.1.0.0/16", "192.0.2.5", 0, false, sharedKey), want, "10.1.0.0/16")
		}
		// Zero, as RFC 9301 has the nonce when no Map-Notify is wanted.
		refused(t, etr, rawRegister(0, "10.1.0.0/16", "192.0.2.5", 0, false, sharedKey), "stale", "10.1.0.0/16")
	})

	t.Run("cross-site", func(t *testing.T) {
		// The records choose the site and the HMAC covers them: site a's
		// datagram made into one for site b's prefix does not verify,
		// though both sites have the same secret.
		forged := slices.Clone(b)
		forged[61] = 2 // 10.1.0.0 -> 10.2.0.0: the EID's second byte, after 48 of header and 12 of record
		refused(t, etr, forged, "auth-failed", "10.2.0.0/16")
		// Each site has its own sequence: site b, from the same address,
		// with a nonce older than site a's last, is taken; its replay is
		// not, nor is site a's after it.
		y := rawRegister(timeNonce(started), "10.2.0.0/16", "192.0.2.20", 0, false, sharedKey)
		send(t, etr, y, "accepted")
		refused(t, etr, y, "replayed", "10.2.0.0/16")
		refused(t, etr, b, "replayed", "10.1.0.0/16")
	})

	t.Run("anti-replay off", func(t *testing.T) {
		// A site whose xTRs send random nonces takes them, and replays.
		r := rawRegister(0x5eed0fa11ed5eed, "10.5.0.0/16", "192.0.2.50", 0, false, sharedKey)
		send(t, etr, r, "accepted")
		send(t, etr, r, "accepted")
	})

	t.Run("restart", func(t *testing.T) {
		latest := rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.6", 0, false, sharedKey)
		send(t, etr, latest, "accepted")
		l.restart(t)
		// Nothing was kept, and nothing signed before the start counts:
		// the last Map-Register before the restart is refused.
		refused(t, etr, latest, "stale", "10.1.0.0/16")
		if got := l.locators(t, "10.1.0.0/16"); len(got) != 0 {
			t.Errorf("after the restart: %v", got)
		}
		send(t, etr, rawRegister(timeNonce(time.Now()), "10.1.0.0/16", "192.0.2.7", 0, false, sharedKey), "accepted")
		if got := l.locators(t, "10.1.0.0/16"); !slices.Equal(got, []string{"192.0.2.7"}) {
			t.Errorf("registered after the restart: %v", got)
		}
		m := scrape(t, n.ms)
		if m[`lispd_map_registers_total{result="stale"}`] != 1 || m[`lispd_map_registers_total{result="accepted"}`] != 1 {
			t.Errorf("metrics after the restart: stale %v, accepted %v", m[`lispd_map_registers_total{result="stale"}`],
				m[`lispd_map_registers_total{result="accepted"}`])
		}
	})
}

// mergeNet is a map-server and two xTRs of one site, each with its own
// RLOC link to the map-server and a host behind it:
//
//	host1 -- xtr1 10.0.1.2 --- 10.0.1.1 ms 10.0.2.1 --- 10.0.2.2 xtr2 -- host2
type mergeNet struct {
	ms, xtr1, xtr2 *testnet.Node
	rloc, eid      [2]*testnet.Link
}

func newMergeNet(t *testing.T) *mergeNet {
	n := testnet.New(t)
	m := &mergeNet{ms: n.Node("ms"), xtr1: n.Node("xtr1"), xtr2: n.Node("xtr2")}
	for i, x := range []*testnet.Node{m.xtr1, m.xtr2} {
		m.rloc[i] = n.Link(x, m.ms, fmt.Sprintf("10.0.%d.2/24", i+1), fmt.Sprintf("10.0.%d.1/24", i+1))
		m.eid[i] = n.Link(n.Node(fmt.Sprintf("host%d", i+1)), x, "10.1.0.1/24", "10.1.0.254/24")
	}
	return m
}

// mergeXTRConfig is xTR i's lispd: the site's prefix through its own RLOC,
// registered as its part (merge) under its xTR-ID.
func (m *mergeNet) xtrConfig(i int) string {
	x := []*testnet.Node{m.xtr1, m.xtr2}[i]
	return fmt.Sprintf(`
roles: [xtr]
listen: ["0.0.0.0"]
log: {level: debug}
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [%s], rloc-interfaces: [%s]}
map-cache: {map-resolvers: [10.0.%d.1]}
xtr:
  xtr-id: "%032x"
  merge: true
  database-mappings:
    - eid-prefix: 10.1.0.0/24
      locators: [{address: 10.0.%d.2, priority: 1, weight: 50}]
  map-servers: [{address: 10.0.%d.1, secret: %q}]
`, m.eid[i].Iface(x), m.rloc[i].Iface(x), i+1, i+1, i+1, i+1, sharedKey)
}

// TestMergedNotifyToXTRs: when an ETR of a merged registration changes the
// merged locators, the map-server tells the others with a Map-Notify, and
// sends it again until they acknowledge it. Two lispd xTRs get it and
// acknowledge it at once; an ETR built here that does not is sent it
// again until it does, and not after.
func TestMergedNotifyToXTRs(t *testing.T) {
	m := newMergeNet(t)
	ms := newLispdProc(t, m.ms, `
roles: [map-server, map-resolver]
listen: ["0.0.0.0"]
log: {level: debug}
control: {socket: {sock}}
map-server:
  sites: [{name: a, keys: [{id: 0, secret: "`+sharedKey+`"}], eid-prefixes: [{prefix: 10.1.0.0/24}]}]
`)
	sock1 := startTunnelLispd(t, m.xtr1, "xtr1", m.xtrConfig(0))
	waitFor(t, "xtr1 registered", func() bool { return tunnelStatus(t, sock1).XTR.MapServers[0].State == "registered" })
	sock2 := startTunnelLispd(t, m.xtr2, "xtr2", m.xtrConfig(1))
	waitFor(t, "xtr2 registered", func() bool { return tunnelStatus(t, sock2).XTR.MapServers[0].State == "registered" })
	// unsolicited is how many Map-Notifies of merged locators an xTR
	// acknowledged.
	unsolicited := func(sock string) uint64 { return tunnelStatus(t, sock).XTR.MapServers[0].Unsolicited }
	counters := func() *daemon.Counters {
		c, err := daemon.QueryCounters(ms.sock)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	waitFor(t, "xtr1 told of xtr2's part, and acknowledging", func() bool {
		return unsolicited(sock1) == 1 && counters().NotifyAcks["accepted"] == 1
	})
	if got := ms.locators(t, "10.1.0.0/24"); !slices.Equal(got, []string{"10.0.1.2", "10.0.2.2"}) {
		t.Fatalf("merged locators %v", got)
	}

	// A third ETR, built here, registers its part from xtr1's node: both
	// xTRs are told.
	third, err := m.xtr1.ListenUDP("udp4", "10.0.1.2:0")
	if err != nil {
		t.Fatal(err)
	}
	msAddr := netip.MustParseAddrPort("10.0.1.1:4342")
	if r := ms.sendAndCount(t, third, msAddr, rawRegister(timeNonce(time.Now()), "10.1.0.0/24", "10.0.1.3", 3, true, sharedKey)); r != "accepted" {
		t.Fatalf("the third ETR's part: %s", r)
	}
	waitFor(t, "both xTRs told of the third part, and acknowledging", func() bool {
		return unsolicited(sock1) == 2 && unsolicited(sock2) == 1 && counters().NotifyAcks["accepted"] == 3
	})

	// A fourth part: the third ETR is told too, and does not answer.
	fourth, err := m.xtr2.ListenUDP("udp4", "10.0.2.2:0")
	if err != nil {
		t.Fatal(err)
	}
	if r := ms.sendAndCount(t, fourth, netip.MustParseAddrPort("10.0.2.1:4342"), rawRegister(timeNonce(time.Now()), "10.1.0.0/24", "10.0.2.4", 4, true, sharedKey)); r != "accepted" {
		t.Fatalf("the fourth ETR's part: %s", r)
	}
	notify := readNotifies(t, third) // its own Map-Notify, then the merged set's, then that again
	if notify == nil {
		t.Fatal("the third ETR was not sent the Map-Notify again")
	}
	waitFor(t, "the xTRs told of the fourth part, and acknowledging", func() bool {
		return unsolicited(sock1) == 3 && unsolicited(sock2) == 2 && counters().NotifyAcks["accepted"] == 5
	})
	// It acknowledges: a Map-Notify-Ack is the Map-Notify with type 5,
	// signed again.
	ack := slices.Clone(notify)
	ack[0] = 5<<4 | ack[0]&0x0f
	if _, err := third.WriteToUDPAddrPort(signRaw(ack, sharedKey), msAddr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the third ETR's acknowledgement", func() bool { return counters().NotifyAcks["accepted"] == 6 })
	sent := counters().MergeNotifies
	if sent["sent"] != 6 || sent["retransmitted"] < 1 || sent["unacknowledged"] != 0 {
		t.Errorf("merge notifies %v: want 6 sent (3 to xtr1, 2 to xtr2, 1 to the third ETR), some retransmitted", sent)
	}
	// Retransmissions stop: none for two intervals, nothing pending.
	if again := readNotifies(t, third); again != nil {
		t.Errorf("sent again after the acknowledgement: %x", again)
	}
	if c := counters(); c.MergeNotifies["retransmitted"] != sent["retransmitted"] {
		t.Errorf("retransmitted %d, then %d after the acknowledgement", sent["retransmitted"], c.MergeNotifies["retransmitted"])
	}
	for _, e := range ms.registration(t, "10.1.0.0/24").ETRs {
		if e.Unacknowledged != nil {
			t.Errorf("%s xtr-id %s: %+v unacknowledged", e.Source, e.XTRID, e.Unacknowledged)
		}
	}
}

// readNotifies reads the Map-Notifies that come to c for up to 7 s (two
// retransmission intervals and then some) and returns the first that
// comes a second time with the same nonce (a retransmission), or nil.
func readNotifies(t *testing.T, c *net.UDPConn) []byte {
	t.Helper()
	seen := map[uint64]bool{}
	buf := make([]byte, 65535)
	deadline := time.Now().Add(7 * time.Second)
	for {
		c.SetReadDeadline(deadline)
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil // the deadline
		}
		if n < 16 || buf[0]>>4 != 4 {
			continue
		}
		nonce := binary.BigEndian.Uint64(buf[4:12])
		if seen[nonce] {
			return slices.Clone(buf[:n])
		}
		seen[nonce] = true
	}
}
