package mapcache

import (
	"errors"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

var errFull = errors.New("map-cache full of local EID-prefixes")

// foreverTTL is how long an entry whose record says TTLForever ("the
// receiver decides") is kept: a day, as the map-server's proxy replies.
const foreverTTL = 24 * time.Hour

// HandleReply takes a Map-Reply that arrived from src. Only a reply whose
// nonce is that of a Map-Request in flight is accepted; its records that
// cover the EID asked are installed, the others refused, each counted by
// reason. A negative record (no locators) installs its action for its
// TTL; a TTL of 0 installs nothing (and removes what the record replaces).
func (c *Cache) HandleReply(reply *lisp.MapReply, src netip.AddrPort) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.nonces[reply.Nonce]
	if !ok {
		c.counter.unsolicited.Add(1)
		c.log.Debug("unsolicited Map-Reply", "from", src, "nonce", reply.Nonce)
		return
	}
	c.finish(r)
	c.counter.replies.Add(1)
	for _, t := range r.tries {
		if t.nonce == reply.Nonce {
			c.resolverAnswered(t.resolver)
		}
	}
	if r.flow != nil {
		c.flowReply(r, reply, src, now)
		return
	}
	replaced := false
	for i := range reply.Records {
		key, reason := c.install(&reply.Records[i], r, src, now)
		c.counter.records[reason].Add(1)
		if reason == Installed || reason == NotCached {
			replaced = replaced || key == r.eid
		}
		if reason == Installed && r.stale {
			c.smrDue[key] = true // the SMR that came meanwhile, from Tick
		}
		if reason != Installed && reason != NotCached {
			c.log.Debug("Map-Reply record refused", "from", src, "eid", reply.Records[i].EID,
				"mask_len", reply.Records[i].MaskLen, "reason", reason.String())
		}
	}
	// What no record resolved is not held any longer.
	c.dropHeld(r.eid)
	// An SMR-invoked reply, or one to the refresh of an adopted entry,
	// replaces the entry it refreshes: if it no longer covers the same
	// prefix, the old entry goes.
	if r.replace && !replaced {
		if old, ok := c.entries.Get(r.eid); ok && !old.local && !old.static {
			c.remove(old)
		}
	}
}

// install puts one record of an accepted Map-Reply into the cache and
// says what became of it. The caller holds the lock.
func (c *Cache) install(rec *lisp.MapRecord, r *request, src netip.AddrPort, now time.Time) (mapping.EID, Reason) {
	key, err := mapping.FromWire(rec.EID, rec.MaskLen)
	if err != nil {
		return key, UnsupportedEID
	}
	// A record must cover what was asked: a replier does not get to
	// install mappings for EIDs nobody asked it about.
	if key.IID != r.eid.IID || !key.Prefix.Contains(r.eid.Prefix.Addr()) {
		return key, NotRequested
	}
	old, exists := c.entries.Get(key)
	if exists && old.local {
		return key, LocalEID
	}
	if exists && old.static {
		return key, StaticEID
	}
	ttl := time.Duration(rec.TTL) * time.Minute
	if rec.TTL == lisp.TTLForever {
		ttl = foreverTTL
	}
	e := &entry{key: key, source: src, installed: now, expires: now.Add(ttl)}
	if len(rec.Locators) == 0 {
		e.action = actionOf(rec.Action)
	} else {
		var unusable int
		e.action = dataplane.Encapsulate
		e.paths, unusable = pathsOf(rec.Locators, c.localRLOCs())
		c.counter.unusableLocators.Add(uint64(unusable))
		if len(e.paths) == 0 && ttl > 0 {
			return key, NoUsableLocator
		}
	}
	if ttl == 0 {
		if exists {
			c.remove(old)
		}
		if e.action != dataplane.Encapsulate || len(e.paths) > 0 {
			c.useOnce(e) // the packets held for it, if any
		}
		return key, NotCached
	}
	if c.installReleasing(e) != nil {
		return key, PutFailed
	}
	c.log.Debug("installed", "eid", key, "action", e.action.String(), "paths", len(e.paths), "ttl", ttl, "from", src)
	return key, Installed
}
