package xtr

import (
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// The te role's sets (docs/te.md). The map-server of an ETR that answers
// for itself cannot engineer its answers, so its te role sends the ETR,
// in an unsolicited Map-Notify signed with the site's key, the mapping
// each source site is to get for each of the ETR's EID-prefixes:
// source-specific records (Source-Dest LCAF, RFC 8060 type 12), the
// source 0/0 for everyone else (RTRs, sources without a set). The ETR
// answers with them as the map-server answers for proxied sites, so that
// a path ID names the same ELP at every router, and binds subflows to
// their ELPs from them (binder.go). They last their records' TTL: a te
// role that stops sending lets them lapse to the configured locators.

// teSet is the mapping one source gets for one prefix of the site.
type teSet struct {
	source  netip.Prefix // 0/0: anyone
	record  lisp.MapRecord
	expires time.Time
}

// takeSets stores the sets of a Map-Notify whose records are all
// source-specific, for prefixes of the site: each replaces the set of
// its source and prefix (the te role sends as many Map-Notifies as the
// sets need; a source it no longer sends lapses with its TTL). It says
// false, storing nothing, for any other Map-Notify. The caller holds the
// lock.
func (x *XTR) takeSets(records []lisp.MapRecord, now time.Time) bool {
	got := map[mapping.EID][]teSet{}
	for _, r := range records {
		iid, src, dst, ok := control.SourceDestOf(r.EID)
		if !ok || src.Addr().Is4() != dst.Addr().Is4() {
			return false
		}
		d := mapping.NewEID(iid, dst)
		if _, ours := x.db.Get(d); !ours {
			return false
		}
		got[d] = append(got[d], teSet{source: src, record: r, expires: now.Add(time.Duration(r.TTL) * time.Minute)})
	}
	if len(got) == 0 {
		return false
	}
	for d, sets := range got {
		for _, n := range sets {
			x.sets[d] = slices.DeleteFunc(x.sets[d], func(s teSet) bool { return s.source == n.source })
		}
		sets = append(x.sets[d], sets...)
		// The most specific source first: the first that holds a
		// requester's EID is its set.
		slices.SortStableFunc(sets, func(a, b teSet) int { return b.source.Bits() - a.source.Bits() })
		x.sets[d] = sets
	}
	return true
}

// recordFor is the record m's answers to source (a Map-Request's source
// EID) carry: the te role's set for it (by the longest source prefix
// that holds it, else the one for anyone), under m's EID-prefix; m's own
// record without sets. The caller holds the lock.
func (x *XTR) recordFor(m *dbMapping, source lisp.Address, now time.Time) lisp.MapRecord {
	_, src, known := control.EIDOf(source)
	for _, s := range x.sets[m.eid] {
		if now.After(s.expires) || !(s.source.Bits() == 0 || known && s.source.Contains(src.Unmap())) {
			continue
		}
		rec := s.record
		rec.EID, rec.MaskLen, rec.Authoritative = m.record.EID, m.record.MaskLen, true
		return rec
	}
	return m.record
}

// expireSets forgets the sets whose TTL ran out. The caller holds the
// lock.
func (x *XTR) expireSets(now time.Time) {
	for d, sets := range x.sets {
		sets = slices.DeleteFunc(sets, func(s teSet) bool { return now.After(s.expires) })
		if len(sets) == 0 {
			delete(x.sets, d)
		} else {
			x.sets[d] = sets
		}
	}
}
