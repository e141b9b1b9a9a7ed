package xtr

import (
	"net/netip"
	"slices"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Update replaces the database mappings, as a configuration reload does.
// The new ones are registered at once, and the ITRs that asked lately for
// a mapping that changed or went get a Solicit-Map-Request, so that they
// ask again instead of using the old mapping until its TTL runs out. It
// returns how many SMRs it sent.
func (x *XTR) Update(mappings []config.DatabaseMapping) (int, error) {
	x.mu.Lock()
	built, err := x.build(mappings)
	if err != nil {
		x.mu.Unlock()
		return 0, err
	}
	old := x.mappings
	x.mappings = built
	x.db = mapping.NewTable[*dbMapping]()
	for _, m := range built {
		x.db.Insert(m.eid, m)
	}
	var changed []mapping.EID
	before := map[mapping.EID]bool{}
	for _, o := range old {
		before[o.eid] = true
		if n, ok := x.db.Get(o.eid); !ok || !sameRecord(o.record, n.record) {
			changed = append(changed, o.eid)
		}
	}
	for _, m := range built {
		if !before[m.eid] {
			changed = append(changed, m.eid) // registered at once too; no ITR asked for it yet
		}
	}
	return x.changed(changed)
}

// SetLocatorReachable sets the R bit of the site's locators whose RLOC
// (the address of a plain locator, the last hop of an ELP) is addr: what
// the xtr says when one of its RLOCs goes down locally, and again when it
// comes back. The mappings that change are registered again at once and
// their ITRs solicited. It returns how many SMRs it sent.
func (x *XTR) SetLocatorReachable(addr netip.Addr, up bool) int {
	x.mu.Lock()
	var changed []mapping.EID
	for _, m := range x.mappings {
		touched := false
		for i, l := range m.cfg.Locators {
			if l.Addr() == addr && m.reachable[i] != up {
				m.reachable[i], touched = up, true
			}
		}
		if touched {
			rec, err := m.build()
			if err != nil { // built before from the same configuration
				continue
			}
			m.record = rec
			changed = append(changed, m.eid)
		}
	}
	n, _ := x.changed(changed)
	return n
}

// changed registers at once and sends SMRs for the mappings that
// changed. It releases the lock, which the caller holds.
func (x *XTR) changed(eids []mapping.EID) (int, error) {
	if len(eids) == 0 {
		x.mu.Unlock()
		return 0, nil
	}
	now := x.now()
	for _, s := range x.servers {
		s.next = now // the next Tick registers
	}
	var out []datagram
	rlocs := x.localRLOCs()
	for k, i := range x.itrs {
		if !slices.Contains(eids, k.eid) {
			continue
		}
		if _, still := x.db.Get(k.eid); !still {
			delete(x.itrs, k)
		}
		b, err := control.EncodeSMR(k.eid, i.sourceIID, i.sourceEID, rlocs, k.itr)
		if err != nil {
			x.log.Debug("cannot build SMR", "eid", k.eid, "itr", k.itr, "error", err)
			continue
		}
		out = append(out, datagram{netip.AddrPortFrom(k.itr, control.Port), b})
	}
	x.mu.Unlock()
	x.log.Info("mappings changed", "eids", len(eids), "smrs", len(out))
	x.transmit(out)
	x.counter.smrs.Add(uint64(len(out)))
	x.Tick()
	return len(out), nil
}

// sameRecord reports whether two records say the same on the wire.
func sameRecord(a, b lisp.MapRecord) bool {
	ea, errA := (&lisp.MapReply{Records: []lisp.MapRecord{a}}).AppendBinary(nil)
	eb, errB := (&lisp.MapReply{Records: []lisp.MapRecord{b}}).AppendBinary(nil)
	return errA == nil && errB == nil && string(ea) == string(eb)
}
