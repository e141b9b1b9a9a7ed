package mapserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/lisp"
)

// When the merged locators of a registration change (an ETR of the merge
// registers another part, leaves or expires), the map-server tells the
// other ETRs of the merge with an unsolicited Map-Notify of the merged
// record, authenticated with the key each registered with, and sends it
// again until a Map-Notify-Ack with its nonce comes back (RFC 9301 §5.7):
// three times 3 s apart, then three more, the interval doubling each
// time; after that the ETR learns the set from the mapping system.
const (
	notifyInterval = 3 * time.Second
	notifySends    = 7 // the first and 3 + 3 retransmissions
)

// retransmitAfter is how long to wait for the Map-Notify-Ack after the
// sends-th send.
func retransmitAfter(sends int) time.Duration {
	return notifyInterval << max(0, sends-3)
}

// pendingNotify is an unsolicited Map-Notify awaiting its Map-Notify-Ack.
type pendingNotify struct {
	etr   *ETR
	push  bool // the te role's sets (push.go), not merged locators
	nonce uint64
	msg   []byte // signed: sent again as it is
	sends int
	since time.Time
	next  time.Time
	deadlines.Slot
}

func (p *pendingNotify) Due() time.Time { return p.next }

// notifyMerged tells the ETRs of reg's merge, but the one whose
// registration changed it (nil for an expiry), the new merged record. With
// out, the first Map-Notifies go at once; without, with the next
// NotifyDue. The caller holds the write lock.
func (s *Server) notifyMerged(reg *Registration, cause *ETR, now time.Time, out *control.Outbox) {
	for _, e := range reg.ETRs {
		if e == cause || !e.Merge {
			continue
		}
		s.stopNotify(e) // a newer set replaces what it was told
		msg, nonce, err := s.encodeNotify(reg, e)
		if err != nil {
			s.log.Warn("cannot build Map-Notify", "to", e.Source, "error", err)
			continue
		}
		p := &pendingNotify{etr: e, nonce: nonce, msg: msg, since: now, next: now}
		if out != nil {
			out.AppendBytes(e.Source, msg)
			p.sends, p.next = 1, now.Add(retransmitAfter(1))
			s.counter.unsolicited.Add(1)
		}
		e.notify = p
		s.notifying[nonce] = p
		s.notifies.Schedule(p)
	}
}

// encodeNotify builds the unsolicited Map-Notify for e: the merged
// record, with e's record TTL and xTR-ID, signed with e's key.
func (s *Server) encodeNotify(reg *Registration, e *ETR) ([]byte, uint64, error) {
	return s.encodeFor(reg, e, []lisp.MapRecord{reg.record(e.TTL)})
}

// encodeFor builds an unsolicited Map-Notify of records for e: a new
// nonce, e's xTR-ID, signed with the key e registered with.
func (s *Server) encodeFor(reg *Registration, e *ETR, records []lisp.MapRecord) ([]byte, uint64, error) {
	n := lisp.MapNotify{Nonce: control.Nonce(), Auth: lisp.Auth{KeyID: e.KeyID, Algorithm: e.alg}, Records: records, XTRID: e.XTRID}
	if e.alg == lisp.AuthNone {
		b, err := n.AppendBinary(nil)
		return b, n.Nonce, err
	}
	key, ok := reg.Site.key(e.KeyID, e.alg)
	if !ok {
		return nil, 0, fmt.Errorf("site %s has no key %d for %s", reg.Site.Name, e.KeyID, e.alg)
	}
	auth := key.auths.Get().(*lisp.Authenticator)
	defer key.auths.Put(auth)
	b, err := signNotify(&n, auth, nil)
	return b, n.Nonce, err
}

// signNotify appends n to b signed with auth (nil: unauthenticated).
func signNotify(n *lisp.MapNotify, auth *lisp.Authenticator, b []byte) ([]byte, error) {
	if auth != nil {
		n.Auth.Data = unsigned[:auth.DataLen()]
	}
	start := len(b)
	b, err := n.AppendBinary(b)
	if err == nil && auth != nil {
		err = auth.Sign(b[start:])
	}
	return b, err
}

// unsigned is the authentication data a message is encoded with before
// it is signed. It is only read: a local array would escape to the heap
// with the message.
var unsigned [32]byte

// stopNotify forgets e's unacknowledged Map-Notify of merged locators.
// The caller holds the write lock.
func (s *Server) stopNotify(e *ETR) { s.stop(e.notify) }

// stop forgets an unacknowledged Map-Notify, nil or not. The caller
// holds the write lock.
func (s *Server) stop(p *pendingNotify) {
	if p == nil {
		return
	}
	delete(s.notifying, p.nonce)
	s.notifies.Remove(p)
	switch {
	case p.push:
		p.etr.push = slices.DeleteFunc(p.etr.push, func(q *pendingNotify) bool { return q == p })
	case p.etr.notify == p:
		p.etr.notify = nil
	}
}

// NotifyDue sends the unsolicited Map-Notifies that are due: the first of
// those an expiry started, and the retransmissions of those not
// acknowledged. It gives up on one after its last send.
func (s *Server) NotifyDue(send control.Sender) {
	type datagram struct {
		dst netip.AddrPort
		b   []byte
	}
	var out []datagram
	now := s.now()
	s.mu.Lock()
	for {
		p, ok := s.notifies.Due(now)
		if !ok {
			break
		}
		if p.sends >= notifySends {
			s.stop(p)
			s.counter.unacknowledged.Add(1)
			s.log.Warn("Map-Notify unacknowledged", "to", p.etr.Source, "eid", p.etr.reg.EID, "sends", p.sends)
			continue
		}
		if p.sends == 0 {
			s.counter.unsolicited.Add(1)
		} else {
			s.counter.retransmits.Add(1)
		}
		p.sends++
		p.next = now.Add(retransmitAfter(p.sends))
		s.notifies.Schedule(p)
		out = append(out, datagram{p.etr.Source, p.msg})
	}
	s.mu.Unlock()
	for _, dg := range out {
		if err := send.Send(dg.dst, dg.b); err != nil {
			s.log.Debug("send Map-Notify", "to", dg.dst, "error", err)
		}
	}
}

// HandleNotifyAck takes a Map-Notify-Ack from src: one with the nonce of
// an unsolicited Map-Notify awaiting it, authenticated with the key that
// Map-Notify was signed with, ends its retransmissions. Anything else is
// counted and dropped.
func (s *Server) HandleNotifyAck(raw []byte, src netip.AddrPort) {
	var m lisp.MapNotifyAck
	if err := m.DecodeFromBytes(raw); err != nil {
		s.counter.acks[AckMalformed].Add(1)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.notifying[m.Nonce]
	if !ok {
		s.counter.acks[AckUnknownNonce].Add(1)
		return
	}
	if r := verifyAck(raw, &m, p.etr); r != AckAccepted {
		s.counter.acks[r].Add(1)
		if s.log.Enabled(context.Background(), slog.LevelWarn) {
			s.log.Warn("Map-Notify-Ack refused", "from", src, "reason", r.String(), "eid", p.etr.reg.EID)
		}
		return
	}
	s.stop(p)
	s.counter.acks[AckAccepted].Add(1)
}

// verifyAck checks that an ack is signed as the Map-Notify was: e's key,
// or nothing when e registered unauthenticated.
func verifyAck(raw []byte, m *lisp.MapNotifyAck, e *ETR) AckResult {
	if m.Auth.KeyID != e.KeyID || m.Auth.Algorithm != e.alg {
		return AckAuthFailed
	}
	if e.alg == lisp.AuthNone {
		return AckAccepted
	}
	key, ok := e.reg.Site.key(e.KeyID, e.alg)
	if !ok {
		return AckAuthFailed
	}
	auth := key.auths.Get().(*lisp.Authenticator)
	defer key.auths.Put(auth)
	if auth.Verify(raw) != nil {
		return AckAuthFailed
	}
	return AckAccepted
}

// sameLocators reports whether two locator sets are the same, in order.
func sameLocators(a, b []lisp.Locator) bool {
	return slices.EqualFunc(a, b, func(x, y lisp.Locator) bool {
		return x.Priority == y.Priority && x.Weight == y.Weight && x.MPriority == y.MPriority && x.MWeight == y.MWeight &&
			x.Local == y.Local && x.Probed == y.Probed && x.Reachable == y.Reachable && x.Address.Equal(y.Address)
	})
}
