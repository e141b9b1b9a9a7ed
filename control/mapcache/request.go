package mapcache

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// request is a Map-Request in flight: for the host route of an EID the
// data plane missed, or for a cached prefix an SMR asked to refresh. Each
// try has its own nonce, and a late reply to an earlier try is taken too,
// so that a slow mapping system is not retried into failure.
type request struct {
	eid      mapping.EID
	flow     *control.Flow  // a stateful request's subflow (flows.go), else nil
	dpFlow   dataplane.Flow // the same, as the data plane names it
	smr      bool           // SMR-invoked (the bit on the wire)
	replace  bool           // its reply replaces the entry for eid: SMR-invoked, or an adopted entry's refresh
	stale    bool           // an SMR came while it was in flight: ask again once answered
	tries    []try
	deadline time.Time
}

type try struct {
	nonce    uint64
	resolver int
}

// maxPending bounds the requests in flight: a scan of many EIDs must not
// grow the map-cache's memory without bound. Misses beyond it are dropped
// and come back from the data plane after its miss interval.
const maxPending = 4096

// innerTTL is the TTL of the ECM's inner header, which nothing routes.
const innerTTL = 64

// Miss asks the map-resolvers for the mapping of an EID the data plane had
// packets for. A request already in flight for it is not repeated, and an
// EID that an entry now covers (installed since the data plane reported
// it) is not asked again, unless that entry says send-map-request.
func (c *Cache) Miss(m dataplane.Miss) {
	c.counter.misses.Add(1)
	if !m.EID.IsValid() || m.InstanceID > 0xffffff {
		c.counter.missInvalid.Add(1)
		return
	}
	eid := mapping.HostEID(m.InstanceID, m.EID.Unmap())
	c.mu.Lock()
	if e, ok := c.entries.Lookup(eid.IID, eid.Prefix.Addr()); ok && e.action != dataplane.SendMapRequest {
		c.mu.Unlock()
		c.counter.missCached.Add(1)
		return
	}
	dg, ok := c.request(&request{eid: eid}, c.now())
	c.mu.Unlock()
	if ok {
		c.transmit([]datagram{dg})
	}
}

// request starts r, a Map-Request for r.eid, unless one is in flight.
// The caller holds the lock and sends the datagram after releasing it.
func (c *Cache) request(r *request, now time.Time) (datagram, bool) {
	if _, ok := c.pending[r.eid]; ok {
		c.counter.deduplicated.Add(1)
		return datagram{}, false
	}
	if len(c.pending) >= maxPending {
		c.counter.overload.Add(1)
		return datagram{}, false
	}
	dg, ok := c.try(r, now)
	if ok {
		c.pending[r.eid] = r
	}
	return dg, ok
}

// try sends r once more, with a new nonce, to the map-resolver
// pickResolver chooses: the first up in the configured order, then the
// ones this request has not asked.
func (c *Cache) try(r *request, now time.Time) (datagram, bool) {
	rlocs := c.localRLOCs()
	if len(rlocs) == 0 {
		c.counter.noRLOC.Add(1)
		c.log.Warn("cannot send a Map-Request: no local RLOC for the reply to come back to", "eid", r.eid)
		c.finish(r)
		return datagram{}, false
	}
	resolver := c.pickResolver(r, now)
	dst := c.resolvers[resolver]
	nonce := control.Nonce()
	b, err := encodeRequest(r, nonce, rlocs, c.sourceEID(r), c.port)
	if err != nil { // only an EID that does not fit a record, which Miss refuses
		c.log.Error("cannot encode Map-Request", "eid", r.eid, "error", err)
		c.finish(r)
		return datagram{}, false
	}
	r.tries = append(r.tries, try{nonce, resolver})
	r.deadline = now.Add(c.timeout)
	c.nonces[nonce] = r
	c.counter.requests.Add(1)
	if r.smr {
		c.counter.smrInvoked.Add(1)
	}
	return datagram{dst, b}, true
}

// finish forgets r and its nonces.
func (c *Cache) finish(r *request) {
	for _, t := range r.tries {
		delete(c.nonces, t.nonce)
	}
	if c.pending[r.eid] == r {
		delete(c.pending, r.eid)
	}
	if r.flow != nil && c.flows[r.dpFlow] == r {
		delete(c.flows, r.dpFlow)
	}
}

// sourceEID is the source EID of r: a stateful request's source host;
// else, for an xTR, its site's first EID-prefix of the instance and
// family, so that an ETR answers with what it has for this site (the te
// role's sets); an RTR gives none. The caller holds the lock.
func (c *Cache) sourceEID(r *request) netip.Addr {
	if r.flow != nil {
		return r.flow.Source.Addr()
	}
	if c.siteEIDs == nil {
		return netip.Addr{}
	}
	var other netip.Addr
	for _, k := range c.siteEIDs() {
		a := k.Prefix.Addr()
		if a.Is4() != r.eid.Prefix.Addr().Is4() {
			continue
		}
		if k.InstanceID == r.eid.IID {
			return a
		}
		if !other.IsValid() {
			other = a
		}
	}
	return other
}

// encodeRequest builds the Encapsulated Map-Request (RFC 9301 §5.8): the
// Map-Request for r's EID (a stateful request's: its flow) from source
// (none when invalid) with every local RLOC as an ITR-RLOC, inside an
// inner IP/UDP header from an RLOC of the EID's family and port (where
// the reply comes back: 4342), to the EID, port 4342.
func encodeRequest(r *request, nonce uint64, rlocs []netip.Addr, source netip.Addr, port uint16) ([]byte, error) {
	itrs := make([]lisp.Address, 0, min(len(rlocs), lisp.MaxITRRLOCs))
	for _, a := range rlocs[:min(len(rlocs), lisp.MaxITRRLOCs)] {
		itrs = append(itrs, lisp.IPAddress(a.Unmap()))
	}
	ip := r.eid.Prefix.Addr()
	src := netip.IPv4Unspecified()
	if ip.Is6() {
		src = netip.IPv6Unspecified()
	}
	for _, a := range rlocs {
		if a = a.Unmap(); a.Is4() == ip.Is4() {
			src = a
			break
		}
	}
	req := &lisp.MapRequest{
		Nonce:      nonce,
		SMRInvoked: r.smr,
		ITRRLOCs:   itrs,
		Records:    []lisp.RequestRecord{{EID: control.EIDAddress(r.eid.IID, ip), MaskLen: uint8(r.eid.Prefix.Bits())}},
	}
	if r.flow != nil {
		req.Records[0].EID = control.FlowAddress(*r.flow)
	}
	if source.IsValid() {
		req.SourceEID = lisp.IPAddress(source)
	}
	ecm := lisp.ECM{
		Source:      netip.AddrPortFrom(src, port),
		Destination: netip.AddrPortFrom(ip, control.Port),
		TTL:         innerTTL,
		Message:     req,
	}
	return ecm.AppendBinary(nil)
}
