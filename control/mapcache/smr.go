package mapcache

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// smrInterval is how often one entry may be refreshed on SMRs: an ETR
// sends them to every ITR it knows, possibly repeatedly, and anyone can
// send one, so each costs at most one Map-Request per entry and second.
// An SMR within the interval is not lost: the refresh it asks for waits
// for the end of the interval, since the mapping may have changed again
// after the reply to the previous one was sent.
const smrInterval = time.Second

// HandleSMR takes a Solicit-Map-Request (RFC 9301 §6.1): an ETR says the
// mapping of its site changed. If an entry covers the EID whose mapping
// changed (the request's source EID, or its first record's EID for
// senders that leave the source EID out), a Map-Request with the
// SMR-invoked bit goes through the map-resolvers, not to the sender, so
// that a forged SMR can only cause a refresh; its reply replaces the entry.
func (c *Cache) HandleSMR(req *lisp.MapRequest, src netip.AddrPort) {
	c.counter.smrs.Add(1)
	iid, eid, ok := control.EIDOf(req.SourceEID)
	if !ok && len(req.Records) > 0 {
		iid, eid, ok = control.EIDOf(req.Records[0].EID)
	}
	if !ok {
		c.counter.smrIgnored.Add(1)
		return
	}
	now := c.now()
	c.mu.Lock()
	e, found := c.entries.Lookup(iid, eid.Unmap())
	if !found && c.staleInFlight(iid, eid.Unmap(), req) {
		// The mapping changed while it is being asked for: the answer
		// on its way may be the one from before.
		c.mu.Unlock()
		c.counter.smrInFlight.Add(1)
		return
	}
	if !found || e.local || e.static {
		c.mu.Unlock()
		c.counter.smrIgnored.Add(1)
		return
	}
	if now.Sub(e.lastSMR) < smrInterval {
		c.smrDue[e.key] = true
		c.mu.Unlock()
		c.counter.smrLimited.Add(1)
		return
	}
	dg, sent := c.refresh(e, now)
	c.mu.Unlock()
	c.log.Debug("SMR", "from", src, "eid", e.key)
	if sent {
		c.transmit([]datagram{dg})
	}
}

// refresh sends the SMR-invoked Map-Request for e. The caller holds the
// lock.
func (c *Cache) refresh(e *entry, now time.Time) (datagram, bool) {
	e.lastSMR = now
	delete(c.smrDue, e.key)
	return c.request(&request{eid: e.key, smr: true, replace: true}, now)
}

// refreshDue sends the refreshes that SMRs asked for within the interval,
// now that it is over. The caller holds the lock.
func (c *Cache) refreshDue(now time.Time) []datagram {
	var out []datagram
	for key := range c.smrDue {
		e, ok := c.entries.Get(key)
		if !ok {
			delete(c.smrDue, key)
			continue
		}
		if now.Sub(e.lastSMR) < smrInterval {
			continue
		}
		if dg, sent := c.refresh(e, now); sent {
			out = append(out, dg)
		}
	}
	return out
}

// staleInFlight marks the requests in flight for EIDs inside the prefix
// an SMR names (its record's, else its source EID's address) as asking
// for a mapping that has changed since: their reply is installed, then
// asked again. It says whether there were any. The caller holds the
// lock.
func (c *Cache) staleInFlight(iid uint32, changed netip.Addr, req *lisp.MapRequest) bool {
	prefix := netip.PrefixFrom(changed, changed.BitLen())
	if len(req.Records) > 0 {
		if i, a, ok := control.EIDOf(req.Records[0].EID); ok && i == iid {
			if p, err := a.Unmap().Prefix(int(req.Records[0].MaskLen)); err == nil && p.Contains(changed) {
				prefix = p
			}
		}
	}
	stale := false
	for _, r := range c.pending {
		if r.eid.IID == iid && prefix.Contains(r.eid.Prefix.Addr()) {
			r.stale, stale = true, true
		}
	}
	return stale
}
