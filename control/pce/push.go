package pce

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// The ETR of a prefix registered without proxy replies answers its
// Map-Requests itself: the map-resolver forwards them, and the te role
// cannot change the answers. It tells the ETR instead: the map-server
// sends it, in authenticated Map-Notifies (mapserver.Push), the record
// each source is to get, as source-specific records (Source-Dest LCAF:
// the source xTR's prefix, the destination prefix), and the record for
// anyone else (source 0/0), which RTRs get; the ETR answers with them
// (control/xtr) and binds subflows from them in the stateful mode. They
// are sent when they change and every half TTL, and the routers that
// asked for the prefix are solicited when they change.

// Forwarded learns from a Map-Request the map-resolver forwards to the
// ETR of a prefix as Engineer learns from the others, and gives that ETR
// the prefix's sets.
func (e *Engine) Forwarded(q resolver.Question) {
	t, _ := e.ask(q)
	if t == nil {
		return
	}
	e.mu.Lock()
	d := e.dest(t.name)
	d.forwarded[q.Answer.EID] = q.Answer.Record
	pushes, smrs := e.pushesOf(t.name, d, e.now())
	e.mu.Unlock()
	e.push(pushes)
	e.solicit(smrs)
}

// pushMsg is the sets of one prefix, for its ETR.
type pushMsg struct {
	eid     mapping.EID
	records []lisp.MapRecord
}

// pushesOf are the sets of d's forwarded prefixes that changed since
// they were last sent, or were sent half a TTL ago; and, when they
// changed, the routers to solicit. The caller holds the lock.
func (e *Engine) pushesOf(name string, d *dest, now time.Time) ([]pushMsg, []asker) {
	if d.slots.Len() == 0 || e.pushFn == nil {
		return nil, nil
	}
	var out []pushMsg
	changed := false
	for _, eid := range slices.SortedFunc(maps.Keys(d.forwarded), compareEIDs) {
		recs := e.setRecords(name, d, eid, d.forwarded[eid])
		digest, err := (&lisp.MapNotify{Records: recs}).AppendBinary(nil)
		if err != nil { // what the role builds encodes
			e.log.Error("cannot encode the sets", "eid", eid, "error", err)
			continue
		}
		was := d.pushed[eid]
		if was.digest == string(digest) && now.Sub(was.at) < e.cfg.TTL.Duration/2 {
			continue
		}
		changed = changed || was.digest != string(digest)
		d.pushed[eid] = pushed{digest: string(digest), at: now}
		out = append(out, pushMsg{eid, recs})
	}
	if !changed {
		return out, nil
	}
	return out, e.askersOf(d)
}

// setRecords are the records of a destination prefix for its ETR: for
// anyone (every ELP in use), then for each source xTR with a set, for
// each of its prefixes of the family, its set. The caller holds the lock.
func (e *Engine) setRecords(name string, d *dest, eid mapping.EID, reg lisp.MapRecord) []lisp.MapRecord {
	anyone := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if eid.Prefix.Addr().Is6() {
		anyone = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	rec := e.record(reg, d, nil)
	rec.EID, rec.MaskLen = control.SourceDestAddress(eid.IID, anyone, eid.Prefix)
	out := []lisp.MapRecord{rec}
	keys := slices.SortedFunc(maps.Keys(e.pairs), func(a, b pairKey) int {
		return cmp.Or(cmp.Compare(a.src, b.src), cmp.Compare(a.dst, b.dst))
	})
	for _, k := range keys {
		p, src := e.pairs[k], e.nodes[k.src]
		if k.dst != name || len(p.set) == 0 || src == nil {
			continue
		}
		for _, s := range src.eids {
			if s.IID != eid.IID || s.Prefix.Addr().Is4() != eid.Prefix.Addr().Is4() {
				continue
			}
			r := e.record(reg, d, p)
			r.EID, r.MaskLen = control.SourceDestAddress(eid.IID, s.Prefix, eid.Prefix)
			out = append(out, r)
		}
	}
	return out
}

// pushAll is what to push and solicit of every destination with
// forwarded prefixes. The caller holds the lock.
func (e *Engine) pushAll(now time.Time) ([]pushMsg, []asker) {
	var pushes []pushMsg
	var smrs []asker
	for _, name := range slices.Sorted(maps.Keys(e.dests)) {
		d := e.dests[name]
		if len(d.forwarded) == 0 {
			continue
		}
		p, s := e.pushesOf(name, d, now)
		pushes, smrs = append(pushes, p...), append(smrs, s...)
	}
	return pushes, smrs
}

// push has the map-server send the sets.
func (e *Engine) push(msgs []pushMsg) {
	for _, m := range msgs {
		if n := e.pushFn(m.eid, m.records); n > 0 {
			e.counter.pushes.Add(uint64(n))
			e.log.Debug("sets sent to the ETR", "eid", m.eid, "records", len(m.records), "etrs", n)
		}
	}
}

func compareEIDs(a, b mapping.EID) int {
	return cmp.Or(cmp.Compare(a.IID, b.IID), a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
}
