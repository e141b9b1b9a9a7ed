package mapcache

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
)

// hop is an ELP hop: "a" plain, "a/L" to look up, with "P" and "S" for
// the other bits.
func hop(s string) lisp.ELPHop {
	addr, bits, _ := cutBits(s)
	h := lisp.ELPHop{Address: lisp.MustParseAddress(addr)}
	for _, b := range bits {
		switch b {
		case 'L':
			h.Lookup = true
		case 'P':
			h.RLOCProbe = true
		case 'S':
			h.Strict = true
		}
	}
	return h
}

func cutBits(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func elpLocator(prio uint8, hops ...string) lisp.Locator {
	e := &lisp.ELP{}
	for _, s := range hops {
		e.Hops = append(e.Hops, hop(s))
	}
	return locator(lisp.LCAFAddress(e), prio, 10)
}

// answer answers the only request sent with records.
func (h *harness) answer(t *testing.T, want string, records ...lisp.MapRecord) {
	t.Helper()
	_, _, req := h.request(t)
	if got := req.Records[0].EID.String(); got != want {
		t.Fatalf("asked for %s, want %s", got, want)
	}
	h.c.HandleReply(&lisp.MapReply{Nonce: req.Nonce, Records: records}, etrAddr)
}

// installedHops are the hops of path i of prefix's entry as the data
// plane has it, and whether it is up.
func (h *harness) installedHops(t *testing.T, prefix string, i int) ([]string, bool) {
	t.Helper()
	e, ok := h.dp.get(key(prefix))
	if !ok || len(e.Paths) <= i {
		t.Fatalf("no path %d of %s: %+v", i, prefix, e)
	}
	var out []string
	for _, hp := range e.Paths[i].Hops {
		out = append(out, hp.Addr.String())
	}
	return out, e.Paths[i].Up
}

// An ELP hop with the L bit is an EID: the router looks it up and splices
// the ELP its mapping gives in its place (or its RLOC), and does it
// again when that mapping changes or expires.
func TestLookupHopExpanded(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
	h.answer(t, "10.2.0.1", record("10.2.0.0/16", 60, elpLocator(1, "192.0.2.1", "10.77.0.1/LS", "192.0.2.9")))
	if hops, up := h.installedHops(t, "10.2.0.0/16", 0); up || !slices.Equal(hops, []string{"192.0.2.1", "10.77.0.1", "192.0.2.9"}) {
		t.Fatalf("before the EID is known: %v up=%v, want its hops, down", hops, up)
	}
	if snap := h.c.Snapshot(); snap[0].Paths[0].Down != "10.77.0.1 is being looked up" {
		t.Errorf("status %+v", snap[0].Paths[0])
	}
	// The EID is asked for from Tick, and the answer expands the path.
	h.c.Tick()
	h.answer(t, "10.77.0.1", record("10.77.0.0/24", 1, elpLocator(1, "192.0.2.21/PS", "192.0.2.22/PS", "192.0.2.23/PS")))
	hops, up := h.installedHops(t, "10.2.0.0/16", 0)
	if want := []string{"192.0.2.1", "192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.9"}; !up || !slices.Equal(hops, want) {
		t.Fatalf("expanded: %v up=%v, want %v", hops, up, want)
	}
	var probed []string
	for _, l := range h.c.Locators() {
		probed = append(probed, l.Addr.String())
	}
	for _, a := range []string{"192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.9"} {
		if !slices.Contains(probed, a) {
			t.Errorf("%s of the expansion not probed: %v", a, probed)
		}
	}
	if slices.Contains(probed, "10.77.0.1") {
		t.Errorf("the EID is probed: %v", probed)
	}
	// A hop of the expansion goes down: the path with it.
	h.down[netip.MustParseAddr("192.0.2.22")] = true
	h.c.LocatorChanged(netip.MustParseAddr("192.0.2.22"))
	if _, up := h.installedHops(t, "10.2.0.0/16", 0); up {
		t.Error("a strict hop of the expansion down, the path is up")
	}
	delete(h.down, netip.MustParseAddr("192.0.2.22"))
	h.c.LocatorChanged(netip.MustParseAddr("192.0.2.22"))

	// The EID's mapping expires: the path is down and the EID asked for
	// again; the new answer (another intra-domain ELP) expands it anew.
	h.clk.advance(61 * time.Second)
	h.c.Tick()
	if _, up := h.installedHops(t, "10.2.0.0/16", 0); up {
		t.Error("the EID's mapping expired, the path is up")
	}
	h.answer(t, "10.77.0.1", record("10.77.0.0/24", 1, elpLocator(1, "192.0.2.31", "192.0.2.22")))
	if hops, up := h.installedHops(t, "10.2.0.0/16", 0); !up || !slices.Equal(hops, []string{"192.0.2.1", "192.0.2.31", "192.0.2.22", "192.0.2.9"}) {
		t.Errorf("expanded again: %v up=%v", hops, up)
	}
	if c := h.c.Counters(); c.Reexpanded < 3 || c.Unexpanded == 0 || c.Loops != 0 {
		t.Errorf("counters %+v", c)
	}
}

// An expansion that repeats an RLOC is a loop: refused and counted. An
// EID that maps to RLOCs gives the first up of the best priority; one
// whose mapping holds EIDs is expanded once more, not beyond.
func TestLookupHopLoopsAndLayers(t *testing.T) {
	h := newHarness(t, oneResolver)
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
	h.answer(t, "10.2.0.1", record("10.2.0.0/16", 60,
		elpLocator(1, "192.0.2.1", "10.77.0.1/L", "192.0.2.9"),
		elpLocator(1, "192.0.2.2", "10.78.0.1/L", "192.0.2.9"),
		elpLocator(1, "192.0.2.3", "10.79.0.1/L", "192.0.2.9")))
	h.c.Tick()
	asked := map[string]uint64{}
	for _, s := range h.net.take() {
		req := s.msg.(*lisp.ECM).Message.(*lisp.MapRequest)
		asked[req.Records[0].EID.String()] = req.Nonce
	}
	if len(asked) != 3 {
		t.Fatalf("asked for %v, want the three EIDs", asked)
	}
	reply := func(eid string, rec lisp.MapRecord) {
		h.c.HandleReply(&lisp.MapReply{Nonce: asked[eid], Records: []lisp.MapRecord{rec}}, etrAddr)
	}
	// A loop back through 192.0.2.1.
	reply("10.77.0.1", record("10.77.0.0/24", 10, elpLocator(1, "192.0.2.21", "192.0.2.1")))
	// RLOCs: the best priority's first that is up.
	h.down[netip.MustParseAddr("192.0.2.31")] = true
	reply("10.78.0.1", record("10.78.0.0/24", 10, locator(lisp.MustParseAddress("192.0.2.33"), 2, 1),
		locator(lisp.MustParseAddress("192.0.2.31"), 1, 1), locator(lisp.MustParseAddress("192.0.2.32"), 1, 1)))
	// A layer more: 10.79.0.1 maps to an ELP through 10.78.0.1.
	reply("10.79.0.1", record("10.79.0.0/24", 10, elpLocator(1, "192.0.2.41", "10.78.0.1/L")))

	if hops, up := h.installedHops(t, "10.2.0.0/16", 0); up {
		t.Errorf("a loop installed up: %v", hops)
	}
	if hops, up := h.installedHops(t, "10.2.0.0/16", 1); !up || !slices.Equal(hops, []string{"192.0.2.2", "192.0.2.32", "192.0.2.9"}) {
		t.Errorf("through RLOCs: %v up=%v", hops, up)
	}
	if hops, up := h.installedHops(t, "10.2.0.0/16", 2); !up || !slices.Equal(hops, []string{"192.0.2.3", "192.0.2.41", "192.0.2.32", "192.0.2.9"}) {
		t.Errorf("two layers: %v up=%v", hops, up)
	}
	snap := h.c.Snapshot()
	if d := snap[0].Paths[0].Down; d != "a loop: 192.0.2.1 twice" {
		t.Errorf("why the loop is down: %q", d)
	}
	if c := h.c.Counters(); c.Loops == 0 {
		t.Errorf("no loop counted: %+v", c)
	}
	// Three layers are one too many.
	h.clk.advance(11 * time.Minute)
	h.c.Tick()
	h.net.take()
	h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.5.0.1")})
	h.answer(t, "10.5.0.1", record("10.5.0.0/16", 60, elpLocator(1, "192.0.2.5", "10.6.0.1/L", "192.0.2.9")))
	h.c.Tick()
	h.answer(t, "10.6.0.1", record("10.6.0.0/16", 60, elpLocator(1, "192.0.2.6", "10.7.0.1/L")))
	h.c.Tick()
	h.answer(t, "10.7.0.1", record("10.7.0.0/16", 60, elpLocator(1, "192.0.2.7", "10.8.0.1/L")))
	h.c.Tick()
	h.answer(t, "10.8.0.1", record("10.8.0.0/16", 60, locator(lisp.MustParseAddress("192.0.2.8"), 1, 1)))
	if _, up := h.installedHops(t, "10.5.0.0/16", 0); up {
		t.Error("three layers deep, up")
	}
	if hops, up := h.installedHops(t, "10.6.0.0/16", 0); !up || !slices.Equal(hops, []string{"192.0.2.6", "192.0.2.7", "192.0.2.8"}) {
		t.Errorf("two layers deep: %v up=%v", hops, up)
	}
	for _, e := range h.c.Snapshot() {
		if e.EIDPrefix == "10.5.0.0/16" && e.Paths[0].Down != "10.8.0.1: more than 2 layers of EIDs" {
			t.Errorf("why three layers are down: %q", e.Paths[0].Down)
		}
	}
}

// With elp-bits as-sent, the P bit says which hops are probed and the S
// bit whether one found down may be gone around; the default takes
// every hop as probed and strict.
func TestHopBits(t *testing.T) {
	for _, tc := range []struct {
		bits      string
		probed    []string
		hops      []string // with 192.0.2.1 down
		up        bool
		strictHop bool // with 192.0.2.2 down too (S=1): down
	}{
		{"as-sent", []string{"192.0.2.1", "192.0.2.2", "192.0.2.9"}, []string{"192.0.2.2", "192.0.2.9"}, true, true},
		{"all-strict", []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.9"}, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.9"}, false, true},
	} {
		t.Run(tc.bits, func(t *testing.T) {
			h := newHarness(t, "map-cache: {map-resolvers: [192.0.2.100], elp-bits: "+tc.bits+"}\n")
			h.c.Miss(dataplane.Miss{EID: netip.MustParseAddr("10.2.0.1")})
			h.answer(t, "10.2.0.1", record("10.2.0.0/16", 60, elpLocator(1, "192.0.2.1/P", "192.0.2.2/PS", "192.0.2.3", "192.0.2.9/P")))
			var probed []string
			for _, l := range h.c.Locators() {
				probed = append(probed, l.Addr.String())
			}
			if !slices.Equal(probed, tc.probed) {
				t.Errorf("probed %v, want %v", probed, tc.probed)
			}
			h.down[netip.MustParseAddr("192.0.2.1")] = true
			h.down[netip.MustParseAddr("192.0.2.3")] = true // not probed with as-sent: not known down
			h.c.LocatorChanged(netip.MustParseAddr("192.0.2.1"))
			if tc.bits == "as-sent" {
				tc.hops = []string{"192.0.2.2", "192.0.2.3", "192.0.2.9"}
			}
			if hops, up := h.installedHops(t, "10.2.0.0/16", 0); up != tc.up || !slices.Equal(hops, tc.hops) {
				t.Errorf("with 192.0.2.1 down: %v up=%v, want %v up=%v", hops, up, tc.hops, tc.up)
			}
			h.down[netip.MustParseAddr("192.0.2.2")] = true
			h.c.LocatorChanged(netip.MustParseAddr("192.0.2.2"))
			if _, up := h.installedHops(t, "10.2.0.0/16", 0); up {
				t.Error("a strict hop down, the path is up")
			}
			// Back: the hop gone around is used again.
			clear(h.down)
			h.c.LocatorChanged(netip.MustParseAddr("192.0.2.1"))
			if hops, up := h.installedHops(t, "10.2.0.0/16", 0); !up || len(hops) != 4 {
				t.Errorf("all back: %v up=%v", hops, up)
			}
		})
	}
}
