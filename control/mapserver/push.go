package mapserver

import (
	"net/netip"
	"slices"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Push sends the ETRs of eid's registration that answer Map-Requests for
// themselves (no proxy reply) records in unsolicited Map-Notifies (as
// many as it takes to fit maxNotifyLen), signed with the key each
// registered with and carrying its xTR-ID, each again until it is
// acknowledged (as notify.go does): the te role's sets of ELPs for the
// prefix, which such an ETR answers with. A push replaces what the ETR
// has not acknowledged of the one before. It returns how many ETRs it
// sent to.
func (s *Server) Push(eid mapping.EID, records []lisp.MapRecord, send control.Sender) int {
	type datagram struct {
		to netip.AddrPort
		b  []byte
	}
	var out []datagram
	etrs := 0
	now := s.now()
	s.mu.Lock()
	if v, ok := s.regs.Get(eid); ok {
		reg := v.reg
		for _, e := range reg.ETRs {
			if e.ProxyReply {
				continue
			}
			s.stopPushes(e)
			for _, part := range fitting(records) {
				msg, nonce, err := s.encodeFor(reg, e, part)
				if err != nil {
					s.log.Warn("cannot build the te role's Map-Notify", "to", e.Source, "eid", eid, "error", err)
					continue
				}
				p := &pendingNotify{etr: e, push: true, nonce: nonce, msg: msg, sends: 1, since: now, next: now.Add(retransmitAfter(1))}
				e.push = append(e.push, p)
				s.notifying[nonce] = p
				s.notifies.Schedule(p)
				s.counter.pushes.Add(1)
				out = append(out, datagram{e.Source, msg})
			}
			etrs++
		}
	}
	s.mu.Unlock()
	for _, dg := range out {
		if err := send.Send(dg.to, dg.b); err != nil {
			s.log.Debug("send the te role's Map-Notify", "to", dg.to, "error", err)
		}
	}
	return etrs
}

// maxNotifyLen bounds a Map-Notify of the te role's sets: a datagram
// that fits the usual path MTU (the control plane does not fragment).
const maxNotifyLen = 1400

// fitting splits records into Map-Notifies of at most maxNotifyLen bytes,
// signed (32 bytes of HMAC-SHA-256) and with an xTR-ID; a record that
// alone is larger goes alone.
func fitting(records []lisp.MapRecord) [][]lisp.MapRecord {
	var out [][]lisp.MapRecord
	for len(records) > 0 {
		n := 1
		for n < len(records) {
			m := lisp.MapNotify{Records: records[:n+1], Auth: lisp.Auth{Data: make([]byte, 32)}, XTRID: &lisp.XTRID{}}
			if m.Len() > maxNotifyLen {
				break
			}
			n++
		}
		out = append(out, records[:n])
		records = records[n:]
	}
	return out
}

// stopPushes forgets what e did not acknowledge of the te role's sets.
// The caller holds the write lock.
func (s *Server) stopPushes(e *ETR) {
	for _, p := range slices.Clone(e.push) {
		s.stop(p)
	}
}
