package xtr

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// registerTries is how many Map-Registers a round sends at most, one per
// notifyTimeout, before it counts as failed and the xtr waits for the
// next register interval.
const (
	registerTries = 3
	notifyTimeout = time.Second
)

// server is a map-server the xtr registers with, and the state of its
// registration.
type server struct {
	addr  netip.AddrPort
	keyID uint8
	alg   lisp.AuthAlgorithm
	auth  *lisp.Authenticator // under the XTR's lock: not safe for concurrent use
	proxy bool

	next    time.Time // the next round
	round   []uint64  // nonces of the round's Map-Registers, while unacknowledged
	retryAt time.Time

	lastRegister, lastNotify time.Time
	registers, notifies      uint64
	unsolicited              uint64 // Map-Notifies of merged sets, acknowledged
	lastUnsolicited          time.Time
	failures, failuresInARow uint64
	lastFailure              string
	lastFailureAt            time.Time
}

func newServer(ref config.MapServerRef) (*server, error) {
	addr, err := config.ListenAddr(ref.Address)
	if err != nil {
		return nil, fmt.Errorf("xtr: map-server: %w", err)
	}
	alg, err := config.AuthAlgorithm(ref.Algorithm)
	if err != nil {
		return nil, fmt.Errorf("xtr: map-server %s: %w", ref.Address, err)
	}
	secret, err := (config.Key{Secret: ref.Secret, SecretFile: ref.SecretFile}).Bytes()
	if err != nil {
		return nil, fmt.Errorf("xtr: map-server %s: %w", ref.Address, err)
	}
	auth, err := lisp.NewAuthenticator(alg, secret)
	if err != nil {
		return nil, fmt.Errorf("xtr: map-server %s: %w", ref.Address, err)
	}
	return &server{addr: addr, keyID: ref.KeyID, alg: alg, auth: auth, proxy: ref.ProxyReply}, nil
}

// timeout is how long a Map-Register waits for its Map-Notify: a second,
// or less with register intervals so short that the round would not fit.
func (x *XTR) timeout() time.Duration {
	return min(notifyTimeout, x.interval/(registerTries+1))
}

// registerDue starts the rounds that are due and retries the
// Map-Registers whose Map-Notify is late. The caller holds the lock.
func (x *XTR) registerDue(now time.Time) []datagram {
	var out []datagram
	for _, s := range x.servers {
		if len(s.round) > 0 && !now.Before(s.retryAt) {
			if len(s.round) >= registerTries {
				x.fail(s, now, fmt.Sprintf("no Map-Notify after %d Map-Registers", len(s.round)))
			} else if dg, ok := x.register(s, now); ok {
				out = append(out, dg)
			}
		}
		if now.Before(s.next) {
			continue
		}
		if len(s.round) > 0 { // the interval is shorter than the retries
			x.fail(s, now, "no Map-Notify before the next registration")
		}
		s.next = now.Add(x.interval)
		if dg, ok := x.register(s, now); ok {
			out = append(out, dg)
		}
	}
	return out
}

// fail ends s's round unacknowledged.
func (x *XTR) fail(s *server, now time.Time, why string) {
	x.endRound(s)
	s.failures++
	s.failuresInARow++
	s.lastFailure, s.lastFailureAt = why, now
	x.counter.failures.Add(1)
	x.log.Warn("registration failed", "map_server", s.addr, "reason", why, "failures_in_a_row", s.failuresInARow)
}

func (x *XTR) endRound(s *server) {
	for _, n := range s.round {
		delete(x.nonces, n)
	}
	s.round = s.round[:0]
}

// register sends one Map-Register of the round, with a new nonce, the
// time, which a map-server with anti-replay wants newer than the last it
// took: a Map-Notify for any of the round's is an acknowledgement.
func (x *XTR) register(s *server, now time.Time) (datagram, bool) {
	nonce := x.stamps.Next(now)
	b, err := x.encodeRegister(s, nonce)
	if err != nil { // the mappings were validated: only a bug gets here
		x.log.Error("cannot build Map-Register", "map_server", s.addr, "error", err)
		return datagram{}, false
	}
	s.round = append(s.round, nonce)
	x.nonces[nonce] = s
	s.retryAt = now.Add(x.timeout())
	s.lastRegister = now
	s.registers++
	x.counter.registers.Add(1)
	return datagram{s.addr, b}, true
}

// encodeRegister builds a Map-Register of every database mapping for s,
// asking for a Map-Notify (M) and for proxy replies (P) as configured,
// signed with s's key.
func (x *XTR) encodeRegister(s *server, nonce uint64) ([]byte, error) {
	m := lisp.MapRegister{
		ProxyReply:    s.proxy,
		MergeRequest:  x.merge,
		WantMapNotify: true,
		Nonce:         nonce,
		Auth:          lisp.Auth{KeyID: s.keyID, Algorithm: s.alg, Data: make([]byte, s.auth.DataLen())},
		XTRID:         x.xtrID,
	}
	for _, dm := range x.mappings {
		m.Records = append(m.Records, dm.record)
	}
	b, err := m.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	if err := s.auth.Sign(b); err != nil {
		return nil, err
	}
	return b, nil
}

// HandleNotify checks a Map-Notify that arrived from src: it acknowledges
// a registration when its nonce is that of a Map-Register awaiting one and
// it verifies with that map-server's key (compared in constant time). One
// with another nonce may be a map-server's news of the site's merged
// locators, which is answered with a Map-Notify-Ack in out (unsolicited).
// Anything else is refused and counted by reason.
func (x *XTR) HandleNotify(raw []byte, src netip.AddrPort, out *control.Outbox) {
	var m lisp.MapNotify
	if err := m.DecodeFromBytes(raw); err != nil {
		x.refuse(NotifyMalformed, src, "error", err)
		return
	}
	now := x.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.nonces[m.Nonce]
	switch {
	case !ok:
		x.unsolicited(&m, raw, src, now, out)
		return
	case m.Auth.Algorithm == lisp.AuthNone:
		x.refuse(NotifyUnauthenticated, src)
		return
	case m.Auth.KeyID != s.keyID || m.Auth.Algorithm != s.alg:
		x.refuse(NotifyWrongKey, src, "key_id", m.Auth.KeyID, "algorithm", m.Auth.Algorithm.String())
		return
	case s.auth.Verify(raw) != nil:
		x.refuse(NotifyAuthFailed, src)
		return
	}
	x.endRound(s)
	s.lastNotify = now
	s.notifies++
	if s.failuresInARow > 0 {
		x.log.Info("registered again", "map_server", s.addr, "after_failures", s.failuresInARow)
	}
	s.failuresInARow = 0
	x.counter.notifies[NotifyAccepted].Add(1)
}

func (x *XTR) refuse(r NotifyResult, src netip.AddrPort, attrs ...any) {
	x.counter.notifies[r].Add(1)
	// An unknown nonce is what anyone can send: not worth a warning.
	level := slog.LevelWarn
	if r == NotifyUnknownNonce || r == NotifyMalformed {
		level = slog.LevelDebug
	}
	x.log.Log(context.Background(), level, "Map-Notify refused", append(attrs, "reason", r.String(), "from", src)...)
}
