package mapping

import (
	"iter"
	"net/netip"

	"github.com/gaissmai/bart"
)

// Table maps EID-prefixes to values with longest-prefix match, one
// routing table per instance ID. It is not safe for concurrent writes; the
// map-server guards it with its lock.
type Table[V any] struct {
	iids map[uint32]*bart.Table[V]
	iid0 *bart.Table[V] // iids[0], for lookups without a map access: most EIDs have no instance ID
	n    int
}

// NewTable returns an empty table.
func NewTable[V any]() *Table[V] { return &Table[V]{iids: map[uint32]*bart.Table[V]{}} }

// Len is the number of EID-prefixes in the table.
func (t *Table[V]) Len() int { return t.n }

// instance returns the table of iid, creating it.
func (t *Table[V]) instance(iid uint32) *bart.Table[V] {
	bt := t.iids[iid]
	if bt == nil {
		bt = new(bart.Table[V])
		t.iids[iid] = bt
		if iid == 0 {
			t.iid0 = bt
		}
	}
	return bt
}

// lookupInstance returns the table of iid, or nil.
func (t *Table[V]) lookupInstance(iid uint32) *bart.Table[V] {
	if iid == 0 {
		return t.iid0
	}
	return t.iids[iid]
}

// Insert sets the value of e, replacing any.
func (t *Table[V]) Insert(e EID, v V) {
	bt := t.instance(e.IID)
	if _, ok := bt.Get(e.Prefix); !ok {
		t.n++
	}
	bt.Insert(e.Prefix, v)
}

// Upsert returns the value of e, inserting create() first when e is not
// in the table, in one walk of the trie.
func (t *Table[V]) Upsert(e EID, create func() V) (v V, created bool) {
	bt := t.instance(e.IID)
	bt.Modify(e.Prefix, func(old V, ok bool) (V, bool) {
		if ok {
			v = old
			return old, false
		}
		v, created = create(), true
		return v, false
	})
	if created {
		t.n++
	}
	return v, created
}

// Delete removes e and reports whether it was there.
func (t *Table[V]) Delete(e EID) bool {
	bt := t.lookupInstance(e.IID)
	if bt == nil {
		return false
	}
	if _, ok := bt.Get(e.Prefix); !ok {
		return false
	}
	bt.Delete(e.Prefix)
	t.n--
	if bt.Size() == 0 {
		delete(t.iids, e.IID)
		if e.IID == 0 {
			t.iid0 = nil
		}
	}
	return true
}

// Get returns the value of exactly e.
func (t *Table[V]) Get(e EID) (V, bool) {
	if bt := t.lookupInstance(e.IID); bt != nil {
		return bt.Get(e.Prefix)
	}
	var zero V
	return zero, false
}

// Lookup returns the value of the longest EID-prefix of instance iid that
// contains a. It is the map-resolver's hot path and twice as fast as
// Covering: values that need their EID carry it.
func (t *Table[V]) Lookup(iid uint32, a netip.Addr) (V, bool) {
	if bt := t.lookupInstance(iid); bt != nil {
		return bt.Lookup(a)
	}
	var zero V
	return zero, false
}

// Covering returns the longest EID-prefix that contains e (e itself if it
// is in the table).
func (t *Table[V]) Covering(e EID) (EID, V, bool) {
	if bt := t.lookupInstance(e.IID); bt != nil {
		if p, v, ok := bt.LookupPrefixLPM(e.Prefix); ok {
			return EID{IID: e.IID, Prefix: p}, v, true
		}
	}
	var zero V
	return EID{}, zero, false
}

// Overlaps reports whether e contains or is contained by an EID-prefix of
// the table.
func (t *Table[V]) Overlaps(e EID) bool {
	bt := t.lookupInstance(e.IID)
	return bt != nil && bt.OverlapsPrefix(e.Prefix)
}

// Gap returns the least-specific prefix that contains a, lies inside
// within, and overlaps no EID-prefix of the table: what a negative
// Map-Reply for a should cover, so that the ITR asks again for nothing
// the table holds (RFC 9301: "the least-specific prefix that both matches
// the original query and does not match any EID-Prefix known to exist").
// a must not be covered by the table, and within must contain a.
func (t *Table[V]) Gap(within EID, a netip.Addr) EID { return gap(t, within, a) }

// gap is Gap for a table that says which EID-prefixes overlap its own.
func gap[T interface{ Overlaps(EID) bool }](t T, within EID, a netip.Addr) EID {
	// An EID-prefix overlapping a/m cannot contain a (the table does not
	// cover a), so it lies inside a/m; then it lies inside a/(m-1) too:
	// overlap is monotone in m, and a binary search finds the least m
	// without it. a/bits (the host) never overlaps.
	lo, hi := within.Prefix.Bits(), a.BitLen()
	for lo < hi {
		mid := (lo + hi) / 2
		p, _ := a.Prefix(mid)
		if t.Overlaps(EID{IID: within.IID, Prefix: p}) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	p, _ := a.Prefix(lo)
	return EID{IID: within.IID, Prefix: p}
}

// All iterates over every EID-prefix and its value, instance by instance.
func (t *Table[V]) All() iter.Seq2[EID, V] {
	return func(yield func(EID, V) bool) {
		for iid, bt := range t.iids {
			for p, v := range bt.All() {
				if !yield(EID{IID: iid, Prefix: p}, v) {
					return
				}
			}
		}
	}
}

// Inside iterates over the EID-prefixes that e contains.
func (t *Table[V]) Inside(e EID) iter.Seq2[EID, V] {
	return func(yield func(EID, V) bool) {
		if bt := t.lookupInstance(e.IID); bt != nil {
			for p, v := range bt.Subnets(e.Prefix) {
				if !yield(EID{IID: e.IID, Prefix: p}, v) {
					return
				}
			}
		}
	}
}
