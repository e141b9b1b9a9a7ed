package xtr

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// unsolicited takes a Map-Notify that acknowledges no Map-Register: a
// map-server sends one to the xTRs of a merged registration when the
// merged locators change (RFC 9301 §5.7), and its te role one with the
// sets of ELPs the site's prefixes are to be answered with (tesets.go),
// each again until it is acknowledged. It is acknowledged when it
// verifies with the key of one of the xtr's map-servers, carries this
// xTR's xTR-ID (or none, as this xTR), and its records are the site's
// EID-prefixes, or source-specific records of them: with a
// Map-Notify-Ack of the same nonce, records and xTR-ID, signed with that
// key, to that map-server's address (not to whoever the datagram claims
// to be from). Merged locators change nothing here: the xTR registers its
// own part, and the mapping system has the merged set; sets are kept.
// Anything else is refused as a Map-Notify of an unknown nonce. The
// caller holds the lock.
func (x *XTR) unsolicited(m *lisp.MapNotify, raw []byte, src netip.AddrPort, now time.Time, out *control.Outbox) {
	s := x.signer(m, raw, src)
	kind := NotifyUnsolicited
	switch {
	case s == nil || !sameXTRID(m.XTRID, x.xtrID):
		kind = NotifyUnknownNonce
	case x.ours(m.Records):
	case x.takeSets(m.Records, now):
		kind = NotifyTESets
	default:
		kind = NotifyUnknownNonce
	}
	if kind == NotifyUnknownNonce {
		x.refuse(NotifyUnknownNonce, src, "nonce", m.Nonce)
		return
	}
	ack := lisp.MapNotifyAck{MapNotify: *m}
	var zero [32]byte
	ack.Auth.Data = zero[:s.auth.DataLen()]
	b := out.Begin()
	start := len(b)
	b, err := ack.AppendBinary(b)
	if err == nil {
		err = s.auth.Sign(b[start:])
	}
	if err != nil { // what decoded encodes again
		x.log.Error("cannot build Map-Notify-Ack", "map_server", s.addr, "error", err)
		return
	}
	out.Commit(s.addr, b)
	s.unsolicited++
	s.lastUnsolicited = now
	x.counter.notifies[kind].Add(1)
	// Debug: a captured one can be sent again at will (it changes nothing,
	// or sets what it set, and is acknowledged again); the status has the
	// count.
	x.log.Debug("unsolicited Map-Notify from the map-server", "kind", kind.String(), "map_server", s.addr,
		"records", len(m.Records), "locators", len(m.Records[0].Locators))
}

// signer is the map-server whose key m verifies with: the one it came
// from first, then the others with its key ID and algorithm. Nil when
// none does, or m is unauthenticated.
func (x *XTR) signer(m *lisp.MapNotify, raw []byte, src netip.AddrPort) *server {
	if m.Auth.Algorithm == lisp.AuthNone {
		return nil
	}
	var found *server
	for _, s := range x.servers {
		if s.keyID != m.Auth.KeyID || s.alg != m.Auth.Algorithm || s.auth.Verify(raw) != nil {
			continue
		}
		if s.addr.Addr() == src.Addr().Unmap() {
			return s
		}
		if found == nil {
			found = s
		}
	}
	return found
}

func sameXTRID(a, b *lisp.XTRID) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// ours reports whether records are all database mappings of the xtr, by
// EID-prefix. The caller holds the lock.
func (x *XTR) ours(records []lisp.MapRecord) bool {
	for _, r := range records {
		eid, err := mapping.FromWire(r.EID, r.MaskLen)
		if err != nil {
			return false
		}
		if _, ok := x.db.Get(eid); !ok {
			return false
		}
	}
	return len(records) > 0
}
