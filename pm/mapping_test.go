package pm

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lig/ligtest"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

func loc(a lisp.Address, priority uint8, up bool) lisp.Locator {
	return lisp.Locator{Priority: priority, Weight: 50, Reachable: up, Address: a}
}

func elpOf(hops ...string) lisp.Address {
	elp := &lisp.ELP{}
	for _, h := range hops {
		elp.Hops = append(elp.Hops, lisp.ELPHop{Address: lisp.MustParseAddress(h)})
	}
	return lisp.LCAFAddress(elp)
}

func record(prefix string, ttl uint32, locs ...lisp.Locator) lisp.MapRecord {
	p := netip.MustParsePrefix(prefix)
	return lisp.MapRecord{TTL: ttl, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()), Locators: locs}
}

// A mapping counts what an xTR chooses from: usable locators (R bit, an
// address a data plane takes) of the best priority below 255, RLOCs and
// ELPs apart.
func TestMappingOf(t *testing.T) {
	afiList := lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{{}, elpOf("192.0.2.20", "198.51.100.2")}})
	for _, tc := range []struct {
		name        string
		locs        []lisp.Locator
		rlocs, elps int
		negative    bool
	}{
		{name: "one RLOC", locs: []lisp.Locator{loc(lisp.MustParseAddress("198.51.100.1"), 1, true)}, rlocs: 1},
		{name: "three RLOCs, one down", locs: []lisp.Locator{
			loc(lisp.MustParseAddress("198.51.100.1"), 1, true),
			loc(lisp.MustParseAddress("198.51.100.2"), 1, false),
			loc(lisp.MustParseAddress("198.51.100.3"), 1, true),
		}, rlocs: 2},
		{name: "best priority only", locs: []lisp.Locator{
			loc(lisp.MustParseAddress("198.51.100.1"), 2, true),
			loc(lisp.MustParseAddress("198.51.100.2"), 1, true),
			loc(lisp.MustParseAddress("198.51.100.3"), 255, true),
		}, rlocs: 1},
		{name: "the best is down", locs: []lisp.Locator{
			loc(lisp.MustParseAddress("198.51.100.1"), 1, false),
			loc(lisp.MustParseAddress("198.51.100.2"), 2, true),
			loc(lisp.MustParseAddress("198.51.100.3"), 2, true),
		}, rlocs: 2},
		{name: "ELPs", locs: []lisp.Locator{
			loc(elpOf("192.0.2.10", "198.51.100.1"), 1, true),
			loc(afiList, 1, true),
			loc(lisp.MustParseAddress("198.51.100.3"), 1, true),
			loc(lisp.NameAddress("not a path"), 1, true),
		}, rlocs: 1, elps: 2},
		{name: "only 255", locs: []lisp.Locator{loc(lisp.MustParseAddress("198.51.100.1"), 255, true)}},
		// A te role's answer (docs/te.md): the destination's ELPs in their
		// slots, this source's set usable, another source's and a retired
		// one at 255. The count follows the set.
		{name: "a te role's set", locs: []lisp.Locator{
			loc(elpOf("192.0.2.11", "198.51.100.1"), 255, true),
			loc(elpOf("192.0.2.12", "198.51.100.1"), 1, true),
			loc(elpOf("192.0.2.13", "198.51.100.1"), 1, true),
			loc(elpOf("192.0.2.14", "198.51.100.1"), 255, true),
			loc(elpOf("192.0.2.15", "198.51.100.1"), 1, true),
		}, elps: 3},
		{name: "negative", negative: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := &lisp.MapReply{Records: []lisp.MapRecord{
				record("10.9.0.0/16", 60),
				record("10.2.0.0/16", 5, tc.locs...),
			}}
			m, err := MappingOf(reply, addr("10.2.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			if m.RLOCs != tc.rlocs || m.ELPs != tc.elps || m.Negative != tc.negative || m.TTL != 5*time.Minute ||
				m.EID != mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/16")) {
				t.Errorf("mapping %+v, want %d RLOCs %d ELPs negative %v", m, tc.rlocs, tc.elps, tc.negative)
			}
		})
	}
	if _, err := MappingOf(&lisp.MapReply{Records: []lisp.MapRecord{record("10.9.0.0/16", 60)}}, addr("10.2.0.1")); err == nil {
		t.Error("a reply without a record for the EID is not an error")
	}
}

// LigMapper asks the map-resolver for peers and the xTR for the local
// EID, from the source EID the query gives (the local EID is asked for
// as the peer would), and says when nobody answers.
func TestLigMapper(t *testing.T) {
	peer := ligtest.NewResolver(t, func(req *ligtest.Request) [][]byte {
		return [][]byte{req.Reply(record("10.2.0.0/24", 10,
			loc(lisp.MustParseAddress("198.51.100.1"), 1, true), loc(lisp.MustParseAddress("198.51.100.2"), 1, true)))}
	})
	local := ligtest.NewResolver(t, func(req *ligtest.Request) [][]byte {
		return [][]byte{req.Reply(record("10.1.0.0/24", 10, loc(lisp.MustParseAddress("192.0.2.1"), 1, true)))}
	})
	m := &LigMapper{Resolver: peer.Addr, XTR: local.Addr, Options: lig.Options{Tries: 1, Timeout: time.Second}}
	got, err := m.Lookup(context.Background(), Query{EID: addr("10.2.0.1")})
	if err != nil || got.RLOCs != 2 || got.Replier != peer.Replier || got.RTT <= 0 {
		t.Errorf("peer lookup %+v, %v", got, err)
	}
	got, err = m.Lookup(context.Background(), Query{EID: addr("10.1.0.1"), From: addr("10.2.0.1"), Local: true})
	if err != nil || got.RLOCs != 1 || len(local.Requests()) != 1 {
		t.Fatalf("local lookup %+v, %v (the xTR got %d requests)", got, err, len(local.Requests()))
	}
	if src := local.Requests()[0].MapRequest.SourceEID.IP(); src != addr("10.2.0.1") {
		t.Errorf("the local EID asked for from %s, want the peer", src)
	}
	silent := ligtest.NewResolver(t, func(*ligtest.Request) [][]byte { return nil })
	m = &LigMapper{Resolver: silent.Addr, Options: lig.Options{Tries: 2, Timeout: 20 * time.Millisecond}}
	if _, err := m.Lookup(context.Background(), Query{EID: addr("10.2.0.1")}); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("lookup without answer: %v, want ErrNoAnswer", err)
	}
}

// The cache answers for every address of a record's prefix until the
// TTL, at most max-cache-ttl.
func TestMapCache(t *testing.T) {
	now := time.Now()
	c := newMapCache(time.Minute, 0)
	c.put(Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.2.0.0/24")), TTL: time.Hour, RLOCs: 2}, now)
	if m, ok := c.get(addr("10.2.0.77"), now.Add(59*time.Second)); !ok || m.RLOCs != 2 {
		t.Errorf("cache miss within the TTL: %+v %v", m, ok)
	}
	if _, ok := c.get(addr("10.2.0.77"), now.Add(time.Minute)); ok {
		t.Error("cache hit after max-cache-ttl")
	}
	if c.len() != 0 {
		t.Errorf("%d entries after expiry", c.len())
	}
	c.put(Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.3.0.0/24")), TTL: 0}, now)
	if c.len() != 0 {
		t.Error("a TTL of 0 was cached")
	}
}

// This host's mapping is cached by the peer it was asked for: another
// peer's site may get other paths towards this host.
func TestLocalMappingCachedByPeer(t *testing.T) {
	e := newTestEngine(t, amptcpConfig).engine
	now := time.Now()
	mine := Mapping{EID: mapping.NewEID(0, netip.MustParsePrefix("10.1.0.0/24")), TTL: time.Hour, ELPs: 3}
	fromB := Query{EID: addr("10.1.0.1"), From: addr("10.2.0.1"), Local: true}
	fromC := Query{EID: addr("10.1.0.1"), From: addr("10.3.0.1"), Local: true}
	e.cacheFor(fromB).put(mine, now)
	if m, ok := e.cacheFor(fromB).get(fromB.EID, now); !ok || m.ELPs != 3 {
		t.Errorf("for peer b: %+v %v", m, ok)
	}
	if _, ok := e.cacheFor(fromC).get(fromC.EID, now); ok {
		t.Error("peer b's answer served to peer c")
	}
	if _, ok := e.cacheFor(Query{EID: addr("10.1.0.1")}).get(fromB.EID, now); ok {
		t.Error("this host's mapping served as a peer's")
	}
}
