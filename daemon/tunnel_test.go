package daemon_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// fakeDP stands in for the eBPF data plane: it keeps what the control
// plane installs, and the test injects misses.
type fakeDP struct {
	rlocs  []netip.Addr
	misses chan dataplane.Miss
	held   chan dataplane.Held

	mu      sync.Mutex
	cfg     *config.Dataplane
	opts    dataplane.Options
	entries map[dataplane.Key]dataplane.Entry
	puts    map[dataplane.Key]int
	closed  bool
	kept    bool
	stored  []dataplane.StoredEntry // what it "adopted"
	pinned  string                  // its pin path; "" for none
	// released are the packets released, each with the action of its
	// entry at the time.
	released []releasedPacket
}

type releasedPacket struct {
	eid    netip.Addr
	action dataplane.Action
}

func newFakeDP(rlocs ...string) *fakeDP {
	f := &fakeDP{misses: make(chan dataplane.Miss, 16), held: make(chan dataplane.Held, 16),
		entries: map[dataplane.Key]dataplane.Entry{}, puts: map[dataplane.Key]int{}}
	for _, a := range rlocs {
		f.rlocs = append(f.rlocs, netip.MustParseAddr(a))
	}
	return f
}

// option makes the daemon use f as its data plane.
func (f *fakeDP) option() daemon.Option {
	return daemon.WithDataplane(func(cfg *config.Dataplane, opts dataplane.Options) (daemon.Dataplane, error) {
		f.mu.Lock()
		f.cfg, f.opts = cfg, opts
		f.mu.Unlock()
		return f, nil
	})
}

func (f *fakeDP) Put(k dataplane.Key, e dataplane.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("put after close")
	}
	f.entries[k] = e
	f.puts[k]++
	return nil
}

func (f *fakeDP) Delete(k dataplane.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.entries, k)
	return nil
}

func (f *fakeDP) Misses() <-chan dataplane.Miss { return f.misses }
func (f *fakeDP) Held() <-chan dataplane.Held   { return f.held }
func (f *fakeDP) LocalRLOCs() []netip.Addr      { return f.rlocs }

// Release records each packet with the action of the entry that covers
// it then.
func (f *fakeDP) Release(pkts []dataplane.Held) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pkts {
		r := releasedPacket{eid: p.EID, action: 255}
		best := -1
		for k, e := range f.entries {
			if k.Prefix.Contains(p.EID) && k.Prefix.Bits() > best {
				best, r.action = k.Prefix.Bits(), e.Action
			}
		}
		f.released = append(f.released, r)
	}
	return nil
}

func (f *fakeDP) Subflows() ([]dataplane.Subflow, error) {
	return []dataplane.Subflow{{Local: netip.MustParseAddrPort("10.1.0.5:40000"), Remote: netip.MustParseAddrPort("10.64.1.7:80"),
		Connection: 0xabc, Path: 1, Packets: 10, Bytes: 14000}}, nil
}

func (f *fakeDP) SubflowEvents() <-chan dataplane.SubflowEvent { return nil }
func (f *fakeDP) Pin(dataplane.Flow, int) error                { return nil }
func (f *fakeDP) Subflow(dataplane.Flow) (dataplane.Subflow, bool, error) {
	return dataplane.Subflow{}, false, nil
}

func (f *fakeDP) Counters() (dataplane.Counters, error) {
	return dataplane.Counters{"itr_encapsulated": 42}, nil
}

func (f *fakeDP) Stored() []dataplane.StoredEntry { return f.stored }
func (f *fakeDP) Adoption() *dataplane.Adoption {
	if f.stored == nil {
		return nil
	}
	return &dataplane.Adoption{Entries: len(f.stored)}
}

func (f *fakeDP) Pinning() dataplane.Pinning {
	if f.pinned == "" {
		return dataplane.Pinning{Error: "dataplane.pin-path is off"}
	}
	return dataplane.Pinning{Path: f.pinned}
}

// Keep keeps the data plane as Close would close it.
func (f *fakeDP) Keep() error {
	if f.pinned == "" {
		return fmt.Errorf("cannot keep the data plane: no pinning")
	}
	if err := f.Close(); err != nil {
		return err
	}
	f.mu.Lock()
	f.kept = true
	f.mu.Unlock()
	return nil
}

func (f *fakeDP) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("closed twice")
	}
	f.closed = true
	close(f.misses)
	close(f.held)
	return nil
}

func (f *fakeDP) miss(eid string) { f.misses <- dataplane.Miss{EID: netip.MustParseAddr(eid)} }

func (f *fakeDP) entry(prefix string) (dataplane.Entry, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := dataplane.Key{Prefix: netip.MustParsePrefix(prefix)}
	e, ok := f.entries[k]
	return e, f.puts[k], ok
}

// waitEntry waits until the entry for prefix satisfies ok.
func (f *fakeDP) waitEntry(t *testing.T, prefix, what string, ok func(dataplane.Entry) bool) dataplane.Entry {
	t.Helper()
	var e dataplane.Entry
	waitFor(t, what, func() bool {
		var found bool
		e, _, found = f.entry(prefix)
		return found && ok(e)
	})
	return e
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// running is a daemon started by runDaemon.
type running struct {
	d    *daemon.Daemon
	sock string
	stop func()
}

// runDaemon starts lispd with the configuration yaml ({sock} stands for
// a control socket path), its sockets opened by in (to open them in a
// network namespace), until stop or the end of the test.
func runDaemon(t *testing.T, yaml string, in func(func() error) error, opts ...daemon.Option) *running {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "lispd.sock")
	cfg, err := config.Parse([]byte(strings.ReplaceAll(yaml, "{sock}", sock)))
	if err != nil {
		t.Fatal(err)
	}
	var d *daemon.Daemon
	if in == nil {
		in = func(f func() error) error { return f() }
	}
	if err := in(func() (err error) { d, err = daemon.New(cfg, nil, opts...); return err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		d.Run(ctx)
		close(done)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &running{d: d, sock: sock, stop: stop}
}

func (r *running) status(t *testing.T) *daemon.Status {
	t.Helper()
	st, err := daemon.QueryStatus(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// xtrConfig is an xtr of one mapping, registering with ms.
func xtrConfig(listen, ms, mapping, extra string, proxy bool) string {
	return fmt.Sprintf(`
roles: [xtr]
listen: [%q]
control: {socket: "{sock}"}
dataplane: {eid-interfaces: [eth1], rloc-interfaces: [eth0]}
map-cache: {map-resolvers: [%q], request-timeout: 500ms, probe-interval: 0s}
xtr:
  database-mappings:
%s
  map-servers: [{address: %q, secret: %q, proxy-reply: %v}]
%s`, listen, ms, mapping, ms, siteKey, proxy, extra)
}

// Over loopback: two xtrs register with a map-server and map-resolver,
// one with the proxy bit; a miss in the data plane of the other becomes a
// Map-Request, its reply an entry with the paths registered, RLOCs and
// ELPs; a negative reply a natively-forward entry.
func TestXTRRegistersAndResolves(t *testing.T) {
	_, msSock := startDaemon(t, "")
	msRun := &running{sock: msSock}
	ms := msRun.status(t).Listen[0]
	dpA, dpB := newFakeDP("127.0.0.1"), newFakeDP("127.0.0.1")
	a := runDaemon(t, xtrConfig("127.0.0.1:0", ms, `
    - eid-prefix: 10.1.0.0/16
      ttl: 5m
      locators:
        - {address: 192.0.2.1, priority: 1, weight: 50}
        - elp: [{address: 198.51.100.1, probe: true}, {address: 198.51.100.2, strict: true}, 192.0.2.1]
          priority: 1
          weight: 50`, "", false), nil, dpA.option())
	b := runDaemon(t, xtrConfig("127.0.0.1:0", ms, `
    - eid-prefix: 10.64.1.0/24
      locators:
        - {address: 192.0.2.2, priority: 1, weight: 70}
        - elp: [198.51.100.3, 192.0.2.2]
          priority: 2
          weight: 30`, "  xtr-id: 0000000000000000000000000000000b\n", true), nil, dpB.option())

	// Both registered: the map-server holds the mappings, ELPs included,
	// and the xtrs had their Map-Notifies.
	waitFor(t, "both registrations", func() bool {
		st := msRun.status(t)
		return len(st.MapServer.Sites[0].Registrations) == 2
	})
	regs := msRun.status(t).MapServer.Sites[0].Registrations
	if regs[0].EID != "10.1.0.0/16" || regs[0].Proxy || len(regs[0].Locators) != 2 ||
		regs[0].Locators[1].Address != "elp{198.51.100.1(P) -> 198.51.100.2(S) -> 192.0.2.1}" {
		t.Errorf("registration of A: %+v", regs[0])
	}
	if regs[1].EID != "10.64.1.0/24" || !regs[1].Proxy || regs[1].ETRs[0].XTRID != "0000000000000000000000000000000b" {
		t.Errorf("registration of B: %+v", regs[1])
	}
	waitFor(t, "A's Map-Notify", func() bool { return a.status(t).XTR.MapServers[0].State == "registered" })
	if dpA.opts.MapCacheEntries != config.DefaultMapCacheEntries || dpA.cfg.EIDInterfaces[0] != "eth1" {
		t.Errorf("data plane created with %+v %+v", dpA.cfg, dpA.opts)
	}
	// The site's own prefix: forwarded natively.
	if e, _, ok := dpA.entry("10.1.0.0/16"); !ok || e.Action != dataplane.NativelyForward {
		t.Errorf("A's own prefix: %+v %v", e, ok)
	}

	// Two packets the ITR handed over to hold: they resolve the EID and
	// are released, in order, while the entry is Hold. The second is
	// held too unless the reply to the first's request came before the
	// map-cache read it (a busy machine, the race detector): then it goes
	// at once, on the installed entry.
	for n := range 2 {
		dpA.held <- dataplane.HeldFrame(0, netip.MustParseAddr("10.64.1.7"), 60+n)
	}
	e := dpA.waitEntry(t, "10.64.1.0/24", "the entry for B's site", func(e dataplane.Entry) bool {
		return e.Action == dataplane.Encapsulate
	})
	// The second packet may reach the map-cache after the entry is in:
	// wait for it rather than read the list at once.
	var released []releasedPacket
	waitFor(t, "both packets released", func() bool {
		dpA.mu.Lock()
		defer dpA.mu.Unlock()
		released = slices.Clone(dpA.released)
		return len(released) >= 2
	})
	if len(released) != 2 || released[0].action != dataplane.Hold ||
		(released[1].action != dataplane.Hold && released[1].action != dataplane.Encapsulate) {
		t.Fatalf("released %+v, want both packets, the first held while the entry was hold", released)
	}
	heldPackets := uint64(1)
	if released[1].action == dataplane.Hold {
		heldPackets = 2
	}
	ip := netip.MustParseAddr
	want := dataplane.Entry{Action: dataplane.Encapsulate, Paths: []dataplane.Path{
		{Hops: []dataplane.Hop{{Addr: ip("192.0.2.2")}}, Priority: 1, Weight: 70, Up: true},
		{Hops: []dataplane.Hop{{Addr: ip("198.51.100.3")}, {Addr: ip("192.0.2.2")}}, Priority: 2, Weight: 30, Up: true},
	}}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("installed %+v\nwant %+v", e, want)
	}
	dpA.miss("172.16.0.1") // outside every site: the largest prefix around it without one
	dpA.waitEntry(t, "128.0.0.0/1", "a negative entry", func(e dataplane.Entry) bool {
		return e.Action == dataplane.NativelyForward && len(e.Paths) == 0
	})

	st := a.status(t)
	if len(st.MapCache) != 3 || st.MapCache[1].EIDPrefix != "10.64.1.0/24" || st.MapCache[1].Source != ms ||
		len(st.MapCache[1].Paths) != 2 || st.MapCache[1].Paths[1].Hops[0].Address != "198.51.100.3" {
		t.Errorf("A's map-cache: %+v", st.MapCache)
	}
	if st.Dataplane == nil || len(st.Dataplane.Subflows) != 1 || st.Dataplane.Counters["itr_encapsulated"] != 42 {
		t.Errorf("A's data plane: %+v", st.Dataplane)
	}
	c := st.Counters.Tunnel
	if c == nil || c.MapReplies["accepted"] != 2 || c.MapReplyRecords["installed"] != 2 || c.MapNotifies["accepted"] < 1 ||
		c.Misses != 1 || c.MapRequests != 2 || c.Dataplane["itr_encapsulated"] != 42 ||
		c.Held["held"] != heldPackets || c.Held["released"] != 2 || c.HeldNow != 0 {
		t.Errorf("A's counters: %+v", c)
	}
	if b.status(t).XTR.MapServers[0].State != "registered" {
		t.Errorf("B: %+v", b.status(t).XTR)
	}
}

// What an xtr refuses, it counts: a Map-Reply it did not ask for, a
// Map-Notify it cannot verify or did not expect, a malformed message.
func TestXTRRefusesAndCounts(t *testing.T) {
	_, msSock := startDaemon(t, "")
	ms := (&running{sock: msSock}).status(t).Listen[0]
	dp := newFakeDP("127.0.0.1")
	x := runDaemon(t, xtrConfig("127.0.0.1:0", ms, "    - {eid-prefix: 10.1.0.0/16, locators: [{address: 192.0.2.1}]}", "", false), nil, dp.option())
	waitFor(t, "the registration", func() bool { return x.status(t).XTR.MapServers[0].State == "registered" })
	nonce := uint64(0x1234)
	notify := &lisp.MapNotify{Nonce: nonce, Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256}}
	forged, _ := notify.AppendSigned(nil, []byte("not the key"))
	unknown, _ := notify.AppendSigned(nil, []byte(siteKey))
	reply, _ := (&lisp.MapReply{Nonce: nonce, Records: []lisp.MapRecord{{TTL: 10, EID: lisp.MustParseAddress("10.64.0.0"), MaskLen: 16,
		Locators: []lisp.Locator{{Reachable: true, Address: lisp.MustParseAddress("203.0.113.66")}}}}}).AppendBinary(nil)
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(x.d.Addrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, b := range [][]byte{forged, unknown, reply, reply[:7], {0x20}, {0x40, 1}} {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the refusals to be counted", func() bool {
		c := x.status(t).Counters
		// The forged Map-Notify has an unknown nonce too: the nonce is
		// checked first, as it costs nothing.
		return c.Tunnel.MapNotifies["unknown-nonce"] == 2 && c.Tunnel.MapNotifies["malformed"] == 1 &&
			c.Tunnel.MapReplies["unsolicited"] == 1 && c.Malformed == 2
	})
	if _, _, ok := dp.entry("10.64.0.0/16"); ok {
		t.Error("the unsolicited Map-Reply was installed")
	}
}
