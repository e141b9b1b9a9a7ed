package mapcache

import (
	"time"

	"github.com/amptcp/amptcp/dataplane"
)

// adoptedTTL is how long an entry adopted from the lispd before is kept
// when no Map-Reply refreshes it: a minute, the smallest record TTL. The
// data plane does not hold the TTL the entry came with.
const adoptedTTL = time.Minute

// Adopt takes over the entries the data plane kept across a restart of
// lispd. Each goes on forwarding as it is, and is asked for again, a few
// at a time from Tick, so that the Map-Reply replaces it with its
// locators and TTL (the data plane does not hold every hop of an ELP,
// which probing needs); one that no reply replaces expires after a
// minute. The site's own EID-prefixes (SetLocal) are not adopted: call
// SetLocal first.
func (c *Cache) Adopt(stored []dataplane.StoredEntry) int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range stored {
		key := eidOf(s.Key)
		if _, ok := c.entries.Get(key); ok {
			continue
		}
		e := &entry{key: key, action: s.Action, adopted: true, adoptedPaths: s.Paths, installed: now, expires: now.Add(adoptedTTL)}
		c.entries.Insert(key, e)
		c.expiry.Schedule(e)
		c.refreshes = append(c.refreshes, key)
		n++
	}
	c.counter.adopted.Add(uint64(n))
	return n
}

// refreshAdopted asks again for adopted entries, keeping half the room
// for requests in flight to misses. The caller holds the lock.
func (c *Cache) refreshAdopted(now time.Time) []datagram {
	var out []datagram
	for len(c.refreshes) > 0 && len(c.pending) < maxPending/2 {
		key := c.refreshes[0]
		c.refreshes = c.refreshes[1:]
		if e, ok := c.entries.Get(key); !ok || !e.adopted {
			continue // replaced or gone meanwhile
		}
		if dg, ok := c.request(&request{eid: key, replace: true}, now); ok {
			out = append(out, dg)
		}
	}
	if len(c.refreshes) == 0 {
		c.refreshes = nil
	}
	return out
}
