package mapcache

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/mapping"
)

// Holding. With the data plane's miss: hold, the ITR hands the packets it
// has no entry for to lispd (dataplane.Held) instead of dropping them. The
// map-cache holds them per destination EID, within hold-per-eid and
// hold-total, while their Map-Request is in flight, and releases them as
// soon as a Map-Reply installs an entry that covers them: for an entry
// with paths, it first installs the entry with action Hold (the site's
// new packets to it join the held ones), releases the held packets in
// order, which the ITR sends on the paths before the write returns, then
// installs the entry's own action. A negative entry applies its action:
// natively-forward releases them to the kernel, drop drops them. What no
// reply resolves is dropped when its request gives up.

// holdStats are the holding's counters.
type holdStats struct {
	held, released, eidFull, totalFull, negative, unresolved, invalid, releaseErrors atomic.Uint64
}

// heldOf is the held packets of one EID, in the order they came, and
// when the first came (Cache.heldSeq): a reply that covers several EIDs
// releases them in the order their first packets came, not in a map's.
type heldOf struct {
	first uint64
	pkts  []dataplane.Held
}

// Hold holds a packet the ITR had no entry for, and asks for its EID's
// mapping unless a request is in flight. A packet whose mapping was
// installed since the ITR handed it over is released at once.
func (c *Cache) Hold(h dataplane.Held) {
	if c.release == nil || !h.EID.IsValid() || h.InstanceID > 0xffffff {
		c.counter.hold.invalid.Add(1)
		return
	}
	eid := mapping.HostEID(h.InstanceID, h.EID.Unmap())
	c.mu.Lock()
	if e, ok := c.entries.Lookup(eid.IID, eid.Prefix.Addr()); ok && e.action != dataplane.SendMapRequest {
		c.settle(e.action, []heldOf{{pkts: []dataplane.Held{h}}})
		c.mu.Unlock()
		return
	}
	q := c.held[eid]
	switch {
	case len(q.pkts) >= c.holdPerEID:
		c.counter.hold.eidFull.Add(1)
		c.mu.Unlock()
		return
	case c.heldTotal >= c.holdTotal:
		c.counter.hold.totalFull.Add(1)
		c.mu.Unlock()
		return
	}
	dg, sent := c.request(&request{eid: eid}, c.now())
	if _, asking := c.pending[eid]; !asking { // too many requests in flight
		c.counter.hold.unresolved.Add(1)
		c.mu.Unlock()
		return
	}
	if len(q.pkts) == 0 {
		q.first, c.heldSeq = c.heldSeq, c.heldSeq+1
	}
	q.pkts = append(q.pkts, h)
	c.held[eid] = q
	c.heldTotal++
	c.counter.hold.held.Add(1)
	c.mu.Unlock()
	if sent {
		c.transmit([]datagram{dg})
	}
}

// heldUnder takes the held packets of the EIDs that key covers out of
// the holding. The caller holds the lock.
func (c *Cache) heldUnder(key mapping.EID) []heldOf {
	var out []heldOf
	for eid, q := range c.held {
		if eid.IID == key.IID && key.Prefix.Contains(eid.Prefix.Addr()) {
			out = append(out, q)
			delete(c.held, eid)
			c.heldTotal -= len(q.pkts)
		}
	}
	slices.SortFunc(out, func(a, b heldOf) int { return cmp.Compare(a.first, b.first) })
	return out
}

// dropHeld drops the held packets of eid, which no reply resolved. The
// caller holds the lock.
func (c *Cache) dropHeld(eid mapping.EID) {
	if q, ok := c.held[eid]; ok {
		delete(c.held, eid)
		c.heldTotal -= len(q.pkts)
		c.counter.hold.unresolved.Add(uint64(len(q.pkts)))
	}
}

// settle does with held packets what an entry of action a does: releases
// them to be sent on (encapsulate, hold) or forwarded natively, or drops
// them. The caller holds the lock, and has installed the entry.
func (c *Cache) settle(a dataplane.Action, held []heldOf) {
	var pkts []dataplane.Held
	for _, q := range held {
		pkts = append(pkts, q.pkts...)
	}
	if len(pkts) == 0 {
		return
	}
	switch a {
	case dataplane.Encapsulate, dataplane.NativelyForward, dataplane.Hold:
		if err := c.release(pkts); err != nil {
			c.counter.hold.releaseErrors.Add(1)
			c.log.Warn("release held packets", "error", err)
		}
		c.counter.hold.released.Add(uint64(len(pkts)))
	default:
		c.counter.hold.negative.Add(uint64(len(pkts)))
	}
}

// installReleasing installs e, which a Map-Reply brought, and releases
// the packets held for the EIDs it covers: an entry with paths is
// installed as Hold until they are gone, so that none of the site's new
// packets overtakes them. The caller holds the lock.
func (c *Cache) installReleasing(e *entry) error {
	held := c.heldUnder(e.key)
	final := e.action
	if len(held) > 0 && final == dataplane.Encapsulate {
		e.action = dataplane.Hold
	}
	err := c.put(e)
	e.action = final
	if err != nil {
		for _, q := range held { // their request is over
			c.counter.hold.unresolved.Add(uint64(len(q.pkts)))
		}
		return err
	}
	c.settle(final, held)
	if len(held) > 0 && final == dataplane.Encapsulate {
		if err := c.fwd.Put(keyOf(e.key), c.dataplaneEntry(e)); err != nil {
			// The entry stays Hold: what the ITR hands over for it now
			// is released at once (Hold).
			c.counter.putErrors.Add(1)
			c.log.Warn("data plane refused a map-cache entry", "eid", e.key, "error", err)
		}
	}
	return nil
}

// useOnce releases the packets held for what a record of TTL 0 covers:
// a mapping to use and not to keep. It installs e as Hold for as long as
// it takes, then removes it. The caller holds the lock, and has removed
// the entry e replaces.
func (c *Cache) useOnce(e *entry) {
	held := c.heldUnder(e.key)
	if len(held) == 0 {
		return
	}
	if e.action == dataplane.Encapsulate {
		e.action = dataplane.Hold
	}
	if e.action == dataplane.Drop || e.action == dataplane.SendMapRequest {
		c.settle(e.action, held)
		return
	}
	if err := c.fwd.Put(keyOf(e.key), c.dataplaneEntry(e)); err != nil {
		c.counter.putErrors.Add(1)
		c.settle(dataplane.Drop, held)
		return
	}
	c.settle(e.action, held)
	if err := c.fwd.Delete(keyOf(e.key)); err != nil {
		c.counter.deleteErrors.Add(1)
	}
}

// HoldCounters are the holding's counters.
type HoldCounters struct {
	// Held packets were taken, Released sent on (or forwarded natively
	// by a negative entry). Dropped: EIDFull beyond hold-per-eid,
	// TotalFull beyond hold-total, Negative by a negative entry's
	// action (drop), Unresolved when no reply resolved them (or too
	// many requests were in flight), Invalid without an EID or with
	// holding off.
	Held, Released, EIDFull, TotalFull, Negative, Unresolved, Invalid uint64
	// ReleaseErrors counts the releases the data plane refused.
	ReleaseErrors uint64
	// Now are the packets held now.
	Now int
}

func (s *holdStats) snapshot() HoldCounters {
	return HoldCounters{Held: s.held.Load(), Released: s.released.Load(), EIDFull: s.eidFull.Load(),
		TotalFull: s.totalFull.Load(), Negative: s.negative.Load(), Unresolved: s.unresolved.Load(),
		Invalid: s.invalid.Load(), ReleaseErrors: s.releaseErrors.Load()}
}
