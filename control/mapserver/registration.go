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
// under the read lock. The merged locators are never changed in place (a
// new slice replaces them), so a record built from them stays valid after
// the lock is released.
type Registration struct {
	EID  mapping.EID
	Site *Site
	ETRs []*ETR
	// locators, action and mapVersion make the record proxy Map-Replies
	// carry (record): the union of the ETRs' locators, in registration
	// order, paths as bare ELPs (canonicalPaths), and the action and
	// map-version of the latest Map-Register. Kept apart rather than as a
	// lisp.MapRecord, whose EID the registration has already: a
	// registration's bytes are memory the kernel maps as registrations
	// come (page faults) and the collector marks.
	locators   []lisp.Locator
	mapVersion uint16
	action     lisp.Action
	// Proxy: an ETR asked the map-server to reply for it (the P bit) and
	// the site allows it.
	Proxy bool
	// roomETR, roomLocators: room's ETR, its locators, were handed out.
	roomETR, roomLocators bool
	// wire is the record encoded when it does not fit the index's slot
	// (regSlot), which proxy replies copy rather than encode it. Readers
	// copy it after the lock is released, so it is never changed in
	// place: a new slice replaces it.
	wire []byte
	room regRoom
}

// regRoom is room for the first ETR and its locators, allocated with the
// registration: most prefixes are registered by one ETR with one
// locator, and one allocation of 352 bytes costs less than three (the
// registration, the ETR, the locators), in the allocator's work and in
// the bytes it rounds up to its size classes.
type regRoom struct {
	etr      ETR
	etrs     [1]*ETR
	locators [1]lisp.Locator
}

// record is the record proxy Map-Replies carry, with ttl.
func (r *Registration) record(ttl uint32) lisp.MapRecord {
	eid, maskLen := r.EID.Wire()
	return lisp.MapRecord{TTL: ttl, EID: eid, MaskLen: maskLen, Action: r.action, MapVersion: r.mapVersion, Locators: r.locators}
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

// update copies what a proxy reply needs from the registration, whose
// record is encoded in wire (nil: it does not encode), and keeps wire in
// the registration when it does not fit the slot.
func (v *regSlot) update(r *Registration, wire []byte) {
	v.proxy, v.n = r.Proxy, 0
	switch {
	case wire != nil && len(wire) <= len(v.wire):
		v.n = uint8(copy(v.wire[:], wire))
		r.wire = nil
	case wire == nil:
		r.wire = nil
	case !bytes.Equal(wire, r.wire): // not a refresh
		r.wire = bytes.Clone(wire)
	}
}

func newRegistration(eid mapping.EID, site *Site) *Registration {
	r := &Registration{EID: eid, Site: site}
	r.ETRs = r.room.etrs[:0]
	return r
}

// newETR adds the registration of another ETR, first registered now.
func (r *Registration) newETR(now time.Time) *ETR {
	var e *ETR
	if r.roomETR {
		e = new(ETR)
	} else {
		e, r.roomETR = &r.room.etr, true
	}
	*e = ETR{first: instantOf(now), reg: r}
	r.ETRs = append(r.ETRs, e)
	return e
}

// ownLocators returns the locators an ETR registers now, decoded into
// storage that the next Map-Register reuses: its old ones when they are
// the same (a refresh), else a copy, in the registration's room the first
// time they fit it.
func (r *Registration) ownLocators(old, decoded []lisp.Locator) []lisp.Locator {
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
	if !r.roomLocators && len(decoded) > 0 && len(decoded) <= len(r.room.locators) {
		r.roomLocators = true
		n := copy(r.room.locators[:], decoded)
		return r.room.locators[:n:n]
	}
	return slices.Clone(decoded)
}

// ETR is one ETR's registration of an EID-prefix.
type ETR struct {
	// Source is where its Map-Register came from; the map-server forwards
	// Map-Requests to this address, port 4342.
	Source netip.AddrPort
	XTRID  *lisp.XTRID
	// Locators, TTL, Action and MapVersion are of the EID-record as the
	// ETR registered it, whose EID is the registration's: its locators,
	// RLOCs and ELPs alike, are returned unchanged.
	Locators     []lisp.Locator
	TTL          uint32
	MapVersion   uint16
	Action       lisp.Action
	ProxyReply   bool // P
	Merge        bool // a
	WantedNotify bool // M, in its last Map-Register
	KeyID        uint8
	alg          lisp.AuthAlgorithm // of the key it registered with
	// first, last: when it first and last registered; expires: when its
	// registration does.
	first, last, expires instant
	Registers            uint64 // Map-Registers accepted for this prefix from this ETR

	notify *pendingNotify   // an unsolicited Map-Notify it has not acknowledged
	push   []*pendingNotify // the te role's sets it has not acknowledged
	reg    *Registration    // for the expiry queue
	deadlines.Slot
}

// etrRecord is what of an ETR's registration the registration's merge
// reads, its locators by their storage, which ownLocators keeps when
// they are the same.
type etrRecord struct {
	first      *lisp.Locator
	n          int
	mapVersion uint16
	action     lisp.Action
	proxyReply bool
}

func (e *ETR) record() etrRecord {
	r := etrRecord{n: len(e.Locators), mapVersion: e.MapVersion, action: e.Action, proxyReply: e.ProxyReply}
	if r.n > 0 {
		r.first = &e.Locators[0]
	}
	return r
}

// Due is when the registration expires, for the expiry queue.
func (e *ETR) Due() time.Time { return e.expires.time() }

// instant is a time as an ETR keeps it: nanoseconds since the process's
// epoch, on the monotonic clock when the time has its reading (time.Now's
// do), as time.Time.Sub does. A time.Time takes 24 bytes; three of them
// were a sixth of a registration.
type instant int64

var epoch = time.Now()

func instantOf(t time.Time) instant { return instant(t.Sub(epoch)) }

func (i instant) time() time.Time { return epoch.Add(time.Duration(i)) }

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

// merge computes the locators replies carry from the ETRs' records: their
// locators without duplicates, in the order the ETRs first registered,
// and the action and map-version of the latest Map-Register. The locators
// are a new slice, or the one ETR's own. It returns the record encoded
// with proxyTTL, in scratch (kept from call to call), or nil when it
// does not encode (a proxy reply then encodes it and reports the error).
func (r *Registration) merge(proxyTTL uint32, scratch *[]byte) []byte {
	if len(r.ETRs) == 0 {
		return nil
	}
	latest := r.ETRs[0]
	for _, e := range r.ETRs[1:] {
		if e.last > latest.last {
			latest = e
		}
	}
	r.action, r.mapVersion = latest.Action, latest.MapVersion
	r.Proxy = false
	for _, e := range r.ETRs {
		r.Proxy = r.Proxy || (e.ProxyReply && r.Site.ProxyReply)
	}
	if len(r.ETRs) == 1 { // the usual case: share the ETR's locators
		r.locators = canonicalPaths(r.ETRs[0].Locators)
	} else {
		r.locators = nil
		for _, e := range r.ETRs {
		next:
			for _, l := range canonicalPaths(e.Locators) {
				for _, have := range r.locators {
					if have.Address.Equal(l.Address) {
						continue next
					}
				}
				r.locators = append(r.locators, l)
			}
		}
	}
	rec := r.record(proxyTTL)
	b, err := rec.AppendBinary((*scratch)[:0])
	*scratch = b
	if err != nil {
		return nil
	}
	return b
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
