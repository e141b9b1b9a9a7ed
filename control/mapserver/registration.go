package mapserver

import (
	"bytes"
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Registration is what the map-server holds for one registered EID-prefix:
// the part each ETR registered and their union, which Map-Replies carry.
// It changes under the server's write lock; readers copy what they need
// under the read lock. Record's locators are never changed in place (a
// new slice replaces them), so a copy of Record stays valid after the
// lock is released.
type Registration struct {
	EID  mapping.EID
	Site *Site
	ETRs []*ETR
	// Record is the mapping proxy Map-Replies carry: the EID, the proxy
	// TTL and the union of the ETRs' locators, in registration order,
	// paths as bare ELPs (canonicalPaths).
	Record lisp.MapRecord
	// Proxy: an ETR asked the map-server to reply for it (the P bit) and
	// the site allows it.
	Proxy    bool
	roomUsed bool
	spare    *ETR // room for the first ETR, allocated with the registration
	// wire is Record encoded, which proxy replies copy rather than encode
	// it. Readers copy it after the lock is released, so it is never
	// changed in place: it is first encoded into room, then into a new
	// slice each time Record changes.
	wire []byte
	room [40]byte
}

// regSlot is what the server's index keeps for a registered prefix:
// the registration and, so that answering a Map-Request reads no more
// than the index's slot, whether the map-server replies for it and the
// record it replies with, when it is small (one IPv4 RLOC for an IPv4
// EID-prefix). 40 bytes, which make the index's slot 64.
type regSlot struct {
	reg   *Registration
	proxy bool
	n     uint8 // bytes of wire; 0: the record is in reg.wire
	wire  [30]byte
}

// update copies what a proxy reply needs from the registration.
func (v *regSlot) update(r *Registration) {
	v.proxy, v.n = r.Proxy, 0
	if len(r.wire) <= len(v.wire) {
		v.n = uint8(copy(v.wire[:], r.wire))
	}
}

// regBlock is a registration with its first ETR, allocated at once: most
// prefixes are registered by one ETR. Its 512 bytes are the most that the
// runtime allocates without a header, and whose pointers the garbage
// collector marks span by span: a field more costs every registration.
type regBlock struct {
	reg   Registration
	first ETR
	etrs  [1]*ETR
}

func newRegistration(eid mapping.EID, site *Site) *Registration {
	b := &regBlock{}
	b.reg = Registration{EID: eid, Site: site, ETRs: b.etrs[:0], spare: &b.first}
	return &b.reg
}

// newETR adds the registration of another ETR, first registered now.
func (r *Registration) newETR(now time.Time) *ETR {
	e := r.spare
	if e == nil {
		e = new(ETR)
	}
	r.spare = nil
	*e = ETR{First: now, reg: r}
	r.ETRs = append(r.ETRs, e)
	return e
}

// ownLocators returns the locators an ETR registers now, decoded into storage
// that the next Map-Register reuses: its old ones when they are the same
// (a refresh), else a copy.
func ownLocators(old, decoded []lisp.Locator) []lisp.Locator {
	if len(old) == len(decoded) && old != nil {
		same := true
		for i := range old {
			a, b := &old[i], &decoded[i]
			same = same && a.Priority == b.Priority && a.Weight == b.Weight && a.MPriority == b.MPriority &&
				a.MWeight == b.MWeight && a.Local == b.Local && a.Probed == b.Probed && a.Reachable == b.Reachable &&
				a.Address.IP().IsValid() && a.Address.AFI() == b.Address.AFI() && a.Address.IP() == b.Address.IP()
		}
		if same {
			return old
		}
	}
	return slices.Clone(decoded)
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
	WantedNotify bool // M, in its last Map-Register
	KeyID        uint8
	alg          lisp.AuthAlgorithm // of the key it registered with
	First, Last  time.Time
	Expires      time.Time
	Registers    uint64 // Map-Registers accepted for this prefix from this ETR

	notify *pendingNotify   // an unsolicited Map-Notify it has not acknowledged
	push   []*pendingNotify // the te role's sets it has not acknowledged
	reg    *Registration    // for the expiry queue
	deadlines.Slot
}

// Due is when the registration expires, for the expiry queue.
func (e *ETR) Due() time.Time { return e.Expires }

// identity tells ETRs apart: by xTR-ID when they send one (I bit), else by
// the address they register from.
type identity struct {
	xtrID  [16]byte
	siteID uint64
	addr   netip.Addr
}

func identityOf(src netip.AddrPort, x *lisp.XTRID) identity {
	if x != nil {
		return identity{xtrID: x.ID, siteID: x.SiteID}
	}
	return identity{addr: src.Addr()}
}

func (e *ETR) identity() identity { return identityOf(e.Source, e.XTRID) }

// find returns the ETR of id, or nil.
func (r *Registration) find(id identity) *ETR {
	for _, e := range r.ETRs {
		if e.identity() == id {
			return e
		}
	}
	return nil
}

// keep drops the ETRs for which keep is false and returns them.
func (r *Registration) keep(keep func(*ETR) bool) (dropped []*ETR) {
	kept := r.ETRs[:0]
	for _, e := range r.ETRs {
		if keep(e) {
			kept = append(kept, e)
		} else {
			dropped = append(dropped, e)
		}
	}
	clear(r.ETRs[len(kept):])
	r.ETRs = kept
	return dropped
}

// merge computes the record replies carry from the ETRs' records: their
// locators without duplicates, in the order the ETRs first registered,
// and the action and map-version of the latest Map-Register. The locators
// are a new slice, or the one ETR's own. scratch is room to encode the
// record in, kept from call to call.
func (r *Registration) merge(proxyTTL uint32, scratch *[]byte) {
	if len(r.ETRs) == 0 {
		return
	}
	eid, maskLen := r.EID.Wire()
	latest := r.ETRs[0]
	for _, e := range r.ETRs[1:] {
		if e.Last.After(latest.Last) {
			latest = e
		}
	}
	last := latest.Record
	r.Record = lisp.MapRecord{
		TTL: proxyTTL, EID: eid, MaskLen: maskLen,
		Action: last.Action, MapVersion: last.MapVersion,
	}
	r.Proxy = false
	for _, e := range r.ETRs {
		r.Proxy = r.Proxy || (e.ProxyReply && r.Site.ProxyReply)
	}
	if len(r.ETRs) == 1 { // the usual case: share the ETR's locators
		r.Record.Locators = canonicalPaths(r.ETRs[0].Record.Locators)
	} else {
		for _, e := range r.ETRs {
		next:
			for _, l := range canonicalPaths(e.Record.Locators) {
				for _, have := range r.Record.Locators {
					if have.Address.Equal(l.Address) {
						continue next
					}
				}
				r.Record.Locators = append(r.Record.Locators, l)
			}
		}
	}
	r.encode(scratch)
}

// encode keeps Record encoded in wire, or nothing when it does not encode
// (a proxy reply then encodes it and reports the error).
func (r *Registration) encode(scratch *[]byte) {
	b, err := r.Record.AppendBinary((*scratch)[:0])
	*scratch = b
	switch {
	case err != nil:
		r.wire = nil
	case bytes.Equal(b, r.wire): // a refresh
	case !r.roomUsed && len(b) <= len(r.room): // never read yet
		r.wire, r.roomUsed = append(r.room[:0], b...), true
	default:
		r.wire = bytes.Clone(b)
	}
}

// canonicalPaths returns locs with every path as a bare ELP LCAF, whatever
// form the ETR registered it in (lispers.net's AFI List of AFI 0 and the
// ELP among them): replies send paths in one form, which every ITR reads.
// It returns locs itself when they need no change.
func canonicalPaths(locs []lisp.Locator) []lisp.Locator {
	var out []lisp.Locator
	for i, l := range locs {
		elp := lisp.PathOf(l.Address)
		if _, bare := l.Address.LCAF().(*lisp.ELP); elp == nil || bare {
			continue
		}
		if out == nil {
			out = slices.Clone(locs)
		}
		out[i].Address = lisp.LCAFAddress(elp)
	}
	if out == nil {
		return locs
	}
	return out
}

// forwardTo is the ETR a Map-Request is forwarded to: the first that
// registered and still does, at the address it registered from (it proved
// itself there, while its RLOCs may be data-plane addresses or paths).
func (r *Registration) forwardTo() netip.Addr {
	return r.ETRs[0].Source.Addr()
}
