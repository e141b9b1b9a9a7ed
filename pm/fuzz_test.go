package pm

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/mptcp"
)

// FuzzEngine drives the engine with any sequence of events, ticks, link
// changes, lookups and resyncs, and checks after each step that no
// connection has more subflows created by the engine alive than its plan,
// and that every slot holds one subflow at most.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 1, 1, 1, 2, 1, 3, 1, 9, 9, 4, 1, 9})
	f.Add([]byte{1, 2, 8, 8, 8, 5, 2, 6, 2, 9, 9, 9, 7, 7, 3, 2})
	f.Add([]byte{1, 0, 2, 0, 10, 0, 11, 0, 9, 9, 9, 12, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		for _, policy := range []string{"policy: subflows\nsubflows: 3\n", "policy: fullmesh\n", amptcpConfig} {
			runOps(t, policy, ops)
		}
	})
}

func runOps(t *testing.T, policy string, ops []byte) {
	cfg, err := Parse([]byte(policy + "repair: {interval: 200ms, max-backoff: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{inUse: map[uint16]bool{40001: true}}
	diag := &fakeDiag{}
	clk := newClock()
	e := newEngine(cfg, slog.New(slog.DiscardHandler))
	e.k, e.diag, e.now = k, diag, clk.now
	e.rand = func(n int) int { return 0 }
	e.localAddrs = func() []netip.Addr { return []netip.Addr{addr("10.1.0.1"), addr("10.1.1.1")} }
	e.ports = func() portRange { return portRange{40000, 40015} }
	var lookups []Query
	e.lookup = func(q Query) { lookups = append(lookups, q) }
	live := map[uint32]map[[2]netip.AddrPort]bool{} // what the engine created and nothing closed
	var all []createCmd

	event := func(ev mptcp.Event) {
		switch ev.Type {
		case mptcp.EventSubClosed:
			delete(live[ev.Token], [2]netip.AddrPort{ev.Local, ev.Remote})
		case mptcp.EventClosed:
			delete(live, ev.Token) // the connection's subflows go with it
		}
		e.event(ev)
	}
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i]%13, ops[i+1]
		token := uint32(arg%3 + 1)
		first := netip.AddrPortFrom(addr("10.1.0.1"), 33000+uint16(token))
		var mine []createCmd
		for _, c := range all {
			if c.token == token {
				mine = append(mine, c)
			}
		}
		pick := func() (netip.AddrPort, netip.AddrPort) {
			if len(mine) == 0 || arg&4 != 0 {
				return first, serverAddr
			}
			c := mine[int(arg)/8%len(mine)]
			return localOf(c), c.remote
		}
		switch op {
		case 0:
			event(mptcp.Event{Type: mptcp.EventCreated, Token: token, Local: first, Remote: serverAddr})
		case 1:
			event(mptcp.Event{Type: mptcp.EventEstablished, Token: token, Local: first, Remote: serverAddr, Server: arg&8 != 0})
		case 2:
			event(mptcp.Event{Type: mptcp.EventClosed, Token: token})
		case 3:
			// Only a subflow that exists can get established.
			mine = slices.DeleteFunc(mine, func(c createCmd) bool { return !live[token][[2]netip.AddrPort{localOf(c), c.remote}] })
			l, r := pick()
			event(mptcp.Event{Type: mptcp.EventSubEstablished, Token: token, Local: l, Remote: r})
		case 4, 5:
			l, r := pick()
			event(mptcp.Event{Type: mptcp.EventSubClosed, Token: token, Local: l, Remote: r, Error: arg & 0x10})
		case 6:
			event(mptcp.Event{Type: mptcp.EventAnnounced, Token: token, RemoteID: arg % 2, Remote: netip.AddrPortFrom(addr(fmt.Sprintf("10.2.%d.1", arg%2+1)), 0)})
		case 7:
			event(mptcp.Event{Type: mptcp.EventRemoved, Token: token, RemoteID: arg % 2})
		case 8, 9:
			clk.add(time.Duration(arg) * 5 * time.Millisecond)
			e.tick()
		case 10:
			e.linkChanged()
		case 11:
			if len(lookups) > 0 {
				l := lookups[0]
				lookups = lookups[1:]
				var err error
				if arg&1 != 0 {
					err = ErrNoAnswer
				}
				p, _ := l.EID.Prefix(24)
				e.lookupDone(l, Mapping{EID: mapping.NewEID(0, p), TTL: time.Minute, RLOCs: int(arg%3) + 1}, time.Millisecond, err)
			}
		case 12:
			var conns []ConnInfo
			var subs []SubflowInfo
			for tk := range live {
				if arg&(1<<tk) != 0 {
					conns = append(conns, ConnInfo{Token: tk, Local: netip.AddrPortFrom(addr("10.1.0.1"), 33000+uint16(tk)), Remote: serverAddr, State: tcpEstablished})
				}
			}
			e.resync(conns, subs, false)
			// sock_diag shows no subflow: none is alive any more.
			clear(live)
		}
		created, destroyed := k.created(), k.destroyed()
		for _, d := range destroyed {
			delete(live[d.token], [2]netip.AddrPort{d.local, d.remote})
		}
		for _, c := range created {
			if live[c.token] == nil {
				live[c.token] = map[[2]netip.AddrPort]bool{}
			}
			live[c.token][[2]netip.AddrPort{localOf(c), c.remote}] = true
			all = append(all, c)
		}
		for token, c := range e.conns {
			checkConn(t, c, len(live[token]))
		}
	}
}

func checkConn(t *testing.T, c *conn, live int) {
	t.Helper()
	if c.plan == nil {
		return
	}
	if len(c.slots) != c.plan.N {
		t.Fatalf("connection %d: %d slots for a plan of %d", c.token, len(c.slots), c.plan.N)
	}
	if live > c.plan.N {
		t.Fatalf("connection %d: %d subflows created and alive, plan of %d", c.token, live, c.plan.N)
	}
	seen := map[netip.AddrPort]bool{}
	for a := range c.attempts() {
		if seen[a.local] {
			t.Fatalf("connection %d: two subflows from %s", c.token, a.local)
		}
		seen[a.local] = true
	}
}
