package mapcache

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// fakeDP is a data plane that remembers what it was given.
type fakeDP struct {
	mu      sync.Mutex
	entries map[dataplane.Key]dataplane.Entry
	puts    []dataplane.Key
	deletes []dataplane.Key
	fail    bool
	// released are the held packets released, in order.
	released []released
}

func (f *fakeDP) Put(k dataplane.Key, e dataplane.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return fmt.Errorf("map full")
	}
	if f.entries == nil {
		f.entries = map[dataplane.Key]dataplane.Entry{}
	}
	f.entries[k] = e
	f.puts = append(f.puts, k)
	return nil
}

func (f *fakeDP) Delete(k dataplane.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.entries, k)
	f.deletes = append(f.deletes, k)
	return nil
}

// released is a packet released, with the action of the entry that
// covered it then (255: none).
type released struct {
	eid    netip.Addr
	n      int // its length, which tells packets apart
	action dataplane.Action
}

func (f *fakeDP) release(pkts []dataplane.Held) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pkts {
		r := released{eid: p.EID, n: p.Len(), action: 255}
		best := -1
		for k, e := range f.entries {
			if k.InstanceID == p.InstanceID && k.Prefix.Contains(p.EID) && k.Prefix.Bits() > best {
				best, r.action = k.Prefix.Bits(), e.Action
			}
		}
		f.released = append(f.released, r)
	}
	return nil
}

func (f *fakeDP) get(k dataplane.Key) (dataplane.Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[k]
	return e, ok
}

// sent is a datagram the cache sent.
type sent struct {
	dst netip.AddrPort
	msg lisp.Message
}

// fakeNet records what is sent, decoded.
type fakeNet struct {
	t   *testing.T
	mu  sync.Mutex
	out []sent
}

func (n *fakeNet) Send(dst netip.AddrPort, b []byte) error {
	m, err := lisp.Parse(b)
	if err != nil {
		n.t.Errorf("sent something that does not decode: %v", err)
		return err
	}
	n.mu.Lock()
	n.out = append(n.out, sent{dst, m})
	n.mu.Unlock()
	return nil
}

// take returns what was sent since the last take.
func (n *fakeNet) take() []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.out
	n.out = nil
	return out
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var (
	resolverA = netip.MustParseAddrPort("192.0.2.100:4342")
	resolverB = netip.MustParseAddrPort("[2001:db8::100]:4342")
	rloc4     = netip.MustParseAddr("198.51.100.1")
	rloc6     = netip.MustParseAddr("2001:db8:1::1")
	etrAddr   = netip.MustParseAddrPort("203.0.113.9:4342")
)

type harness struct {
	c   *Cache
	dp  *fakeDP
	net *fakeNet
	clk *clock
	// down is what the fake prober says is unreachable.
	down map[netip.Addr]bool
}

func newHarness(t *testing.T, yaml string) *harness {
	t.Helper()
	return newHarnessWith(t, yaml, nil)
}

// newHarnessWith lets more options be set.
func newHarnessWith(t *testing.T, yaml string, more func(*Options)) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte("roles: [rtr]\ndataplane: {rloc-interfaces: [eth0]}\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{dp: &fakeDP{}, net: &fakeNet{t: t}, clk: &clock{t: time.Unix(1_700_000_000, 0)},
		down: map[netip.Addr]bool{}}
	var mu sync.Mutex
	opts := Options{
		Forwarder:  h.dp,
		Sender:     h.net,
		LocalRLOCs: func() []netip.Addr { return []netip.Addr{rloc4, rloc6} },
		Reachable: func(a netip.Addr) bool {
			mu.Lock()
			defer mu.Unlock()
			return !h.down[a]
		},
		RTT:     func(a netip.Addr) (time.Duration, bool) { return 12 * time.Millisecond, a == rloc4 },
		Release: h.dp.release,
	}
	if more != nil {
		more(&opts)
	}
	h.c, err = New(cfg.MapCache, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.c.SetClock(h.clk.now)
	return h
}

const oneResolver = "map-cache: {map-resolvers: [192.0.2.100], request-timeout: 1s, request-retries: 2}\n"

// request returns the only Map-Request sent since the last take, with
// its ECM and destination.
func (h *harness) request(t *testing.T) (netip.AddrPort, *lisp.ECM, *lisp.MapRequest) {
	t.Helper()
	out := h.net.take()
	if len(out) != 1 {
		t.Fatalf("%d datagrams sent, want one Map-Request", len(out))
	}
	ecm, ok := out[0].msg.(*lisp.ECM)
	if !ok {
		t.Fatalf("sent %s, want an ECM", out[0].msg)
	}
	return out[0].dst, ecm, ecm.Message.(*lisp.MapRequest)
}

func locator(a lisp.Address, prio, weight uint8) lisp.Locator {
	return lisp.Locator{Priority: prio, Weight: weight, Reachable: true, Address: a}
}

func record(prefix string, ttl uint32, locs ...lisp.Locator) lisp.MapRecord {
	p := netip.MustParsePrefix(prefix)
	return lisp.MapRecord{TTL: ttl, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()), Locators: locs}
}

func key(prefix string) dataplane.Key {
	return dataplane.Key{Prefix: netip.MustParsePrefix(prefix)}
}

var _ control.Sender = (*fakeNet)(nil)

// fakePins remembers the pins of subflows, in order.
type fakePins struct {
	mu  sync.Mutex
	got []string
}

func (p *fakePins) Pin(f dataplane.Flow, path int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, fmt.Sprintf("%s %d", f.Local, path))
	return nil
}

func (p *fakePins) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.got
	p.got = nil
	return out
}
