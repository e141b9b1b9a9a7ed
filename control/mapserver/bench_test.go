package mapserver

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// benchStart is the time of the bench's clock and of its first nonce.
var benchStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// registers builds n signed single-record Map-Registers for distinct /32s
// of 10.64.0.0/10, as ETRs send them, with M set and nonces that increase
// from benchStart.
func registers(b *testing.B, n int) [][]byte {
	msgs := make([][]byte, n)
	first := control.TimeNonce(benchStart)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 64 | byte(i>>16&63), byte(i >> 8), byte(i)})
		m := &lisp.MapRegister{ProxyReply: true, WantMapNotify: true, Nonce: first + uint64(i),
			Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 3, EID: lisp.IPAddress(ip), MaskLen: 32,
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")}}}}}
		var err error
		if msgs[i], err = m.AppendSigned(nil, []byte("bench key")); err != nil {
			b.Fatal(err)
		}
	}
	return msgs
}

func benchServer(b *testing.B, antiReplay bool) *Server {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
roles: [map-server]
map-server:
  sites: [{name: bench, keys: [{id: 0, secret: bench key}], anti-replay: %v, eid-prefixes: [{prefix: 10.64.0.0/10, accept-more-specifics: true}]}]
`, antiReplay)))
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg.MapServer, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.SetClock(func() time.Time { return benchStart })
	return s
}

// BenchmarkHandleRegister measures Map-Registers with HMAC-SHA-256 and
// their Map-Notify, without sockets: new prefixes into a table that grows,
// and refreshes of registered ones (the same messages again, which only a
// site without anti-replay takes); and new prefixes with anti-replay,
// whose nonces increase. Reference: the HMAC verification and signing
// alone, which every register costs.
func BenchmarkHandleRegister(b *testing.B) {
	const n = 1 << 20
	msgs := registers(b, n)
	src := netip.MustParseAddrPort("192.0.2.1:4342")
	var out control.Outbox
	for _, phase := range []string{"New", "Refresh", "NewAntiReplay"} {
		s := benchServer(b, phase == "NewAntiReplay")
		if phase == "Refresh" {
			for _, m := range msgs {
				out.Reset()
				s.HandleRegister(m, src, &out)
			}
		}
		b.Run(phase, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				out.Reset()
				s.HandleRegister(msgs[i%n], src, &out)
				i++
			}
			// Past the n messages, anti-replay refuses them the second time.
			want := i
			if phase == "NewAntiReplay" {
				want = min(i, n)
			}
			if c := s.Counters(); c.Registers[Accepted] < uint64(want) {
				b.Fatalf("%d accepted of %d", c.Registers[Accepted], i)
			}
		})
	}
	b.Run("Reference", func(b *testing.B) {
		a, err := lisp.NewAuthenticator(lisp.AuthHMACSHA256, []byte("bench key"))
		if err != nil {
			b.Fatal(err)
		}
		msg := append([]byte(nil), msgs[0]...)
		for b.Loop() {
			if err := a.Verify(msg); err != nil {
				b.Fatal(err)
			}
			if err := a.Sign(msg); err != nil {
				b.Fatal(fmt.Errorf("sign: %w", err))
			}
		}
	})
}
