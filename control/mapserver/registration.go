package mapserver

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Registration is what the map-server holds for one registered EID-prefix:
// the part each ETR registered and their union, which Map-Replies carry.
// It is replaced, never changed, once published: a reader holding one
// under the read lock may keep using it after releasing the lock.
type Registration struct {
	EID  mapping.EID
	Site *Site
	ETRs []*ETR
	// Record is the mapping proxy Map-Replies carry: the EID, the proxy
	// TTL and the union of the ETRs' locators, in registration order.
	Record lisp.MapRecord
	// Proxy: an ETR asked the map-server to reply for it (the P bit) and
	// the site allows it.
	Proxy bool
}

// ETR is one ETR's registration of an EID-prefix.
type ETR struct {
	// Source is where its Map-Register came from; the map-server forwards
	// Map-Requests to this address, port 4342.
	Source netip.AddrPort
	XTRID  *lisp.XTRID
	// Record is the EID-record as the ETR registered it: its locators,
	// RLOCs and ELPs alike, are returned unchanged.
	Record       lisp.MapRecord
	ProxyReply   bool // P
	Merge        bool // a
	KeyID        uint8
	First, Last  time.Time
	Expires      time.Time
	Registers    uint64 // Map-Registers accepted for this prefix from this ETR
	WantedNotify bool   // M, in its last Map-Register

	timer *timer // its place in the expiry heap, carried over on refresh
}

// identity tells ETRs apart: by xTR-ID when they send one (I bit), else by
// the address they register from.
type identity struct {
	xtrID  [16]byte
	siteID uint64
	addr   netip.Addr
}

func (e *ETR) identity() identity {
	if e.XTRID != nil {
		return identity{xtrID: e.XTRID.ID, siteID: e.XTRID.SiteID}
	}
	return identity{addr: e.Source.Addr()}
}

// with returns the registration after etr registered, and the ETRs it no
// longer holds: with merge semantics (the a bit) etr replaces only its own
// part, otherwise the whole set (RFC 9301: each ETR registers all of the
// site's locators). A refreshing ETR keeps its first-registered time and
// its timer.
func (r *Registration) with(etr *ETR, proxyTTL uint32) (next *Registration, dropped []*ETR) {
	next = &Registration{EID: r.EID, Site: r.Site}
	id := etr.identity()
	for _, old := range r.ETRs {
		switch {
		case old.identity() == id:
			etr.First, etr.Registers, etr.timer = old.First, old.Registers+1, old.timer
		case etr.Merge && old.Merge:
			next.ETRs = append(next.ETRs, old)
		default:
			dropped = append(dropped, old)
		}
	}
	next.ETRs = append(next.ETRs, etr)
	next.merge(proxyTTL)
	return next, dropped
}

// without returns the registration without the ETR of id, or nil if no
// ETR is left, and the ETR it dropped.
func (r *Registration) without(id identity, proxyTTL uint32) (*Registration, *ETR) {
	next := &Registration{EID: r.EID, Site: r.Site}
	var gone *ETR
	for _, old := range r.ETRs {
		if old.identity() == id {
			gone = old
		} else {
			next.ETRs = append(next.ETRs, old)
		}
	}
	if len(next.ETRs) == 0 {
		return nil, gone
	}
	next.merge(proxyTTL)
	return next, gone
}

// merge computes the record replies carry from the ETRs' records: their
// locators without duplicates, the newest registration's action and
// map-version.
func (r *Registration) merge(proxyTTL uint32) {
	eid, maskLen := r.EID.Wire()
	last := r.ETRs[len(r.ETRs)-1].Record
	r.Record = lisp.MapRecord{
		TTL: proxyTTL, EID: eid, MaskLen: maskLen,
		Action: last.Action, MapVersion: last.MapVersion,
	}
	r.Proxy = false
	for _, e := range r.ETRs {
		r.Proxy = r.Proxy || (e.ProxyReply && r.Site.ProxyReply)
	}
	if len(r.ETRs) == 1 { // the usual case: share the ETR's locators
		r.Record.Locators = last.Locators
		return
	}
	for _, e := range r.ETRs {
	next:
		for _, l := range e.Record.Locators {
			for _, have := range r.Record.Locators {
				if have.Address.Equal(l.Address) {
					continue next
				}
			}
			r.Record.Locators = append(r.Record.Locators, l)
		}
	}
}

// forwardTo is the ETR a Map-Request is forwarded to: the one that
// registered last, at the address it registered from (it proved itself
// there, while its RLOCs may be data-plane addresses or paths).
func (r *Registration) forwardTo() netip.Addr {
	return r.ETRs[len(r.ETRs)-1].Source.Addr()
}
