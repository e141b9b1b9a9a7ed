package mapserver

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// replayHarness sends Map-Registers to a map-server with a test clock and
// says what became of each.
type replayHarness struct {
	t   *testing.T
	s   *Server
	clk *clock
	out control.Outbox
}

func newReplayHarness(t *testing.T) *replayHarness {
	s, clk := newServer(t)
	return &replayHarness{t: t, s: s, clk: clk}
}

// msg is a signed Map-Register of 10.1.0.0/16 (site-a) through rloc, with
// nonce and the xTR-ID id (none when 0), M set.
func (h *replayHarness) msg(nonce uint64, rloc string, id byte) []byte {
	m := &lisp.MapRegister{ProxyReply: true, WantMapNotify: true, Nonce: nonce,
		Records: []lisp.MapRecord{record("10.1.0.0/16", lisp.MustParseAddress(rloc))}}
	if id != 0 {
		m.XTRID = &lisp.XTRID{ID: [16]byte{id}}
	}
	m.Auth.Algorithm = lisp.AuthHMACSHA256
	b, err := m.AppendSigned(nil, []byte("key-a")) // the nonce as it is, 0 too
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// send hands b to the map-server from src and returns the reason it was
// counted under; a refused one must change nothing and get no Map-Notify.
func (h *replayHarness) send(b []byte, src netip.AddrPort) Reason {
	h.t.Helper()
	before, was := status(h.t, h.s), h.s.Counters().Registers
	h.out.Reset()
	h.s.HandleRegister(b, src, &h.out)
	now := h.s.Counters().Registers
	for r := range now {
		if now[r] == was[r]+1 {
			if r != int(Accepted) {
				if after := status(h.t, h.s); after != before {
					h.t.Errorf("refused as %s, but the state changed:\nbefore %s\nafter  %s", Reason(r), before, after)
				}
				if h.out.Len() != 0 {
					h.t.Errorf("refused as %s, but answered", Reason(r))
				}
			}
			return Reason(r)
		}
	}
	h.t.Fatalf("Map-Register not counted: %v -> %v", was, now)
	return 0
}

// rlocs are the locators registered for 10.1.0.0/16.
func (h *replayHarness) rlocs() string {
	ans := resolve(h.t, h.s, 0, netip.MustParseAddr("10.1.0.1"))
	var got []string
	for _, l := range ans.Record.Locators {
		got = append(got, l.Address.String())
	}
	return strings.Join(got, " ")
}

func seconds(n int) uint64 { return uint64(n) << 32 }

// A captured Map-Register sent again, or one overtaken by a newer, is
// refused, from wherever it comes: with no xTR-ID the site's xTRs share
// one sequence, since the source address proves nothing.
func TestReplayAndReorderRefused(t *testing.T) {
	h := newReplayHarness(t)
	a := h.msg(h.clk.nonce(), "192.0.2.1", 0)
	if r := h.send(a, etr1); r != Accepted {
		t.Fatalf("A: %s", r)
	}
	h.clk.advance(time.Second)
	b := h.msg(h.clk.nonce(), "192.0.2.2", 0)
	if r := h.send(b, etr1); r != Accepted {
		t.Fatalf("B: %s", r)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		src  netip.AddrPort
	}{
		{"A again", a, etr1},
		{"B again", b, etr1}, // would refresh a registration its ETR gave up
		{"A from another address", a, etr2},
		{"B from another address", b, etr2},
	} {
		if r := h.send(tc.msg, tc.src); r != Replayed {
			t.Errorf("%s: %s, want replayed", tc.name, r)
		}
	}
	if got := h.rlocs(); got != "192.0.2.2" {
		t.Errorf("after the replays: %s, want B's", got)
	}

	// Reordered: D is newer than C, and arrives first.
	c := h.msg(h.clk.nonce(), "192.0.2.3", 0)
	d := h.msg(h.clk.nonce(), "192.0.2.4", 0)
	if r := h.send(d, etr1); r != Accepted {
		t.Fatalf("D: %s", r)
	}
	if r := h.send(c, etr1); r != Replayed {
		t.Errorf("C after D: %s, want replayed", r)
	}
	if got := h.rlocs(); got != "192.0.2.4" {
		t.Errorf("after the reordering: %s, want D's", got)
	}
}

// A nonce far from the map-server's clock, or older than the map-server,
// is refused.
func TestStaleAndFutureNoncesRefused(t *testing.T) {
	h := newReplayHarness(t)
	start := h.clk.t
	h.clk.advance(time.Hour)
	window := config.DefaultReplayWindow
	for _, tc := range []struct {
		name string
		at   time.Time
		want Reason
	}{
		{"older than the window", h.clk.t.Add(-window - time.Second), Stale},
		{"ahead by more than the window", h.clk.t.Add(window + time.Second), Future},
		{"zero, as RFC 9301 has it without a Map-Notify", time.Unix(0, 0), Stale},
		{"just inside the window", h.clk.t.Add(-window + time.Second), Accepted},
		{"ahead, inside the window", h.clk.t.Add(window - time.Second), Accepted},
	} {
		if r := h.send(h.msg(control.TimeNonce(tc.at), "192.0.2.1", 1), etr1); r != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, r, tc.want)
		}
	}

	// Signed before the map-server started: within the window, but
	// refused, for nothing is remembered from before.
	h = newReplayHarness(t)
	h.clk.advance(10 * time.Second)
	if r := h.send(h.msg(control.TimeNonce(start.Add(-time.Second)), "192.0.2.1", 1), etr1); r != Stale {
		t.Errorf("signed before the start: %s, want stale", r)
	}
}

// Each xTR-ID of a site, and each site, has its own sequence: one xTR's
// clock behind another's does not stop it.
func TestSequencesPerXTRAndSite(t *testing.T) {
	h := newReplayHarness(t)
	now := control.TimeNonce(h.clk.t)
	old1 := h.msg(now+seconds(1), "192.0.2.1", 1)
	for _, tc := range []struct {
		name string
		msg  []byte
		want Reason
	}{
		{"xTR 1", old1, Accepted},
		{"xTR 1, newer", h.msg(now+seconds(3), "192.0.2.1", 1), Accepted},
		{"xTR 2, behind xTR 1", h.msg(now+seconds(2), "192.0.2.2", 2), Accepted},
		{"no xTR-ID, behind xTR 1", h.msg(now+seconds(2), "192.0.2.3", 0), Accepted},
		{"site b, no xTR-ID, same source, behind site a", register(t, &lisp.MapRegister{Nonce: now + seconds(1), Records: []lisp.MapRecord{
			record("2001:db8:b::/48", lisp.MustParseAddress("192.0.2.1"))}}, "key-b"), Accepted},
		{"xTR 1's first again", old1, Replayed},
	} {
		if r := h.send(tc.msg, etr1); r != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, r, tc.want)
		}
	}
}

// An xTR's state is forgotten once its nonces are older than the window:
// its Map-Registers are then refused as stale instead.
func TestReplayStateForgottenAfterTheWindow(t *testing.T) {
	h := newReplayHarness(t)
	a := h.msg(h.clk.nonce(), "192.0.2.1", 1)
	h.send(a, etr1)
	h.clk.advance(config.DefaultReplayWindow / 2)
	h.s.Expire()
	if len(h.s.replay.last) != 1 {
		t.Fatalf("%d xTRs remembered inside the window", len(h.s.replay.last))
	}
	h.clk.advance(config.DefaultReplayWindow)
	h.s.Expire()
	if len(h.s.replay.last) != 0 {
		t.Errorf("%d xTRs remembered after the window", len(h.s.replay.last))
	}
	if r := h.send(a, etr1); r != Stale {
		t.Errorf("A after the window: %s, want stale", r)
	}
}

// A site with anti-replay off takes any nonce, a repeated one too: what
// xTRs that send random nonces need.
func TestAntiReplayOff(t *testing.T) {
	cfg, err := config.Parse([]byte(strings.Replace(testConfig, "proxy-reply: false", "proxy-reply: false\n      anti-replay: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg.MapServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out control.Outbox
	b := register(t, &lisp.MapRegister{Nonce: 0x5eed, Records: []lisp.MapRecord{
		record("2001:db8:b::/48", lisp.MustParseAddress("192.0.2.1"))}}, "key-b")
	for range 2 {
		s.HandleRegister(b, etr1, &out)
	}
	if c := s.Counters(); c.Registers[Accepted] != 2 {
		t.Errorf("counters %v", c.Registers)
	}
}

// Refusals are logged once per reason every refusalEvery, with how many
// were not.
func TestRefusalsLoggedOnceInAWhile(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := New(cfg.MapServer, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	s.SetClock(clk.now)
	var out control.Outbox
	a := register(t, &lisp.MapRegister{Nonce: clk.nonce(), Records: []lisp.MapRecord{
		record("10.1.0.0/16", lisp.MustParseAddress("192.0.2.1"))}}, "key-a")
	s.HandleRegister(a, etr1, &out)
	for range 100 {
		s.HandleRegister(a, etr1, &out)
	}
	clk.advance(refusalEvery)
	s.HandleRegister(a, etr1, &out)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "reason=replayed") || !strings.Contains(lines[1], "not_logged_since=99") {
		t.Errorf("logged:\n%s", logs.String())
	}
	if c := s.Counters(); c.Registers[Replayed] != 101 {
		t.Errorf("replayed %d", c.Registers[Replayed])
	}
}
