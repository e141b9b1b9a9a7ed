package mapcache

import (
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/mapping"
)

// entry is a map-cache entry: what the data plane holds for key, and
// where it came from.
type entry struct {
	key    mapping.EID
	action dataplane.Action
	paths  []path
	// laid are the paths as last installed, expanded (layered.go), and
	// probes the hops whose reachability decides about each: what tells
	// which probe results and mappings change the entry.
	laid   []dataplane.Path
	probes [][]dataplane.Hop
	// local marks the site's own EID-prefixes, static the entries of
	// the configuration: they never expire and Map-Replies do not
	// replace them.
	local, static bool
	// adopted marks an entry the data plane kept across a restart, with
	// adoptedPaths paths there; a Map-Reply replaces it (adopt.go).
	adopted        bool
	adoptedPaths   int
	source         netip.AddrPort // who sent the Map-Reply
	installed      time.Time
	expires        time.Time
	lastSMR        time.Time
	deadlines.Slot // in the expiry queue, unless local
}

// Due is when e expires, for the expiry queue.
func (e *entry) Due() time.Time { return e.expires }

// dataplaneEntry is what the data plane gets for e: each path expanded
// (its Lookup hops, the hops probing finds down that it may go around)
// and up when its R bit is set, it expands and the hops it must use are
// reachable. It records that in e, to tell later what changes it.
func (c *Cache) dataplaneEntry(e *entry) dataplane.Entry {
	de := dataplane.Entry{Action: e.action}
	e.probes = e.probes[:0]
	for _, p := range e.paths {
		l := c.layout(e.key.IID, p)
		de.Paths = append(de.Paths, dataplane.Path{Hops: l.hops, Priority: p.priority, Weight: p.weight, Up: l.up})
		e.probes = append(e.probes, l.probed)
	}
	e.laid = de.Paths
	return de
}

// put installs e in the data plane and the cache, replacing the entry of
// the same key, and evicting the entry closest to expiry when the cache is
// full. The caller holds the lock.
func (c *Cache) put(e *entry) error {
	old, exists := c.entries.Get(e.key)
	if !exists && c.entries.Len() >= c.maxEntries {
		victim, ok := c.expiry.First()
		if !ok { // full of local prefixes: nothing may go
			c.counter.full.Add(1)
			return errFull
		}
		c.remove(victim)
		c.counter.evicted.Add(1)
	}
	if err := c.fwd.Put(keyOf(e.key), c.dataplaneEntry(e)); err != nil {
		c.counter.putErrors.Add(1)
		c.log.Warn("data plane refused a map-cache entry", "eid", e.key, "error", err)
		return err
	}
	if exists {
		e.lastSMR = old.lastSMR
		c.expiry.Remove(old)
		delete(c.layered, old)
	}
	c.entries.Insert(e.key, e)
	if !e.local && !e.static {
		c.expiry.Schedule(e)
	}
	if hasLookup(e) {
		c.layered[e] = true
	}
	c.relayer()
	c.repin(e)
	return nil
}

// remove deletes e from the data plane and the cache. The caller holds
// the lock.
func (c *Cache) remove(e *entry) {
	if err := c.fwd.Delete(keyOf(e.key)); err != nil {
		c.counter.deleteErrors.Add(1)
		c.log.Warn("data plane did not delete a map-cache entry", "eid", e.key, "error", err)
	}
	c.expiry.Remove(e)
	c.entries.Delete(e.key)
	delete(c.layered, e)
	c.relayer()
}

// expire removes the entries whose TTL ran out. The caller holds the lock.
func (c *Cache) expire(now time.Time) {
	for {
		e, ok := c.expiry.Due(now)
		if !ok {
			return
		}
		c.remove(e)
		c.counter.expired.Add(1)
		c.log.Debug("expired", "eid", e.key)
	}
}

// SetLocal installs the site's own EID-prefixes as natively-forward
// entries, so that the ITR never encapsulates traffic that stays in the
// site, and removes the local entries of prefixes no longer given (a
// configuration reload). They never expire and Map-Replies do not
// replace them.
func (c *Cache) SetLocal(keys []dataplane.Key) error {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[mapping.EID]bool{}
	for _, k := range keys {
		want[eidOf(k)] = true
	}
	var gone []*entry
	for key, e := range c.entries.All() {
		if e.local && !want[key] {
			gone = append(gone, e)
		}
	}
	for _, e := range gone {
		c.remove(e)
	}
	for _, k := range keys {
		if old, ok := c.entries.Get(eidOf(k)); ok && old.local {
			continue
		}
		e := &entry{key: eidOf(k), action: dataplane.NativelyForward, local: true, installed: now}
		if err := c.put(e); err != nil {
			return err
		}
	}
	return nil
}

// Locator is a locator address that entries use, with the EID-prefix of
// one of them: RLOC probes ask about it.
type Locator struct {
	Addr netip.Addr
	EID  mapping.EID
}

// Locators lists the distinct addresses the entries' paths go through
// that probing decides about: plain RLOCs and the hops of ELPs, expanded
// (with elp-probe p-bit, those with the P bit).
func (c *Cache) Locators() []Locator {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[netip.Addr]bool{}
	var locs []Locator
	for key, e := range c.entries.All() {
		for _, hops := range e.probes {
			for _, h := range hops {
				if !seen[h.Addr] {
					seen[h.Addr] = true
					locs = append(locs, Locator{Addr: h.Addr, EID: key})
				}
			}
		}
	}
	return locs
}

// LocatorChanged re-installs the entries with a path through addr whose
// Up changed since they were installed: what RLOC probing learnt moves
// traffic away from a failed locator and back. It returns how many
// entries it re-installed.
func (c *Cache) LocatorChanged(addr netip.Addr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, e := range c.entries.All() {
		if !e.uses(addr) || !c.changed(e) {
			continue
		}
		if err := c.fwd.Put(keyOf(key), c.dataplaneEntry(e)); err != nil {
			c.counter.putErrors.Add(1)
			c.log.Warn("data plane refused a map-cache entry", "eid", key, "error", err)
			continue
		}
		n++
		c.counter.reinstalled.Add(1)
	}
	c.relayer() // an expansion may take another path of an EID now
	if n > 0 {
		c.log.Info("locator reachability changed", "rloc", addr, "up", c.reachable(addr), "entries", n)
	}
	return n
}

func (e *entry) uses(addr netip.Addr) bool {
	for _, hops := range e.probes {
		for _, h := range hops {
			if h.Addr == addr {
				return true
			}
		}
	}
	return false
}

// changed reports whether e's paths would be installed otherwise now
// than when e was: a path up or down, a hop gone around or back, an
// expansion changed.
func (c *Cache) changed(e *entry) bool {
	if len(e.laid) != len(e.paths) {
		return true
	}
	for i, p := range e.paths {
		l := c.layout(e.key.IID, p)
		if was := e.laid[i]; was.Up != l.up || !slices.Equal(was.Hops, l.hops) {
			return true
		}
	}
	return false
}
