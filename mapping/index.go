package mapping

import (
	"encoding/binary"
	"iter"
	"net/netip"
)

// Index maps EID-prefixes to values with longest-prefix match, as Table
// does, for the map-server's registrations: millions of prefixes, looked
// up at every Map-Request and inserted at every new Map-Register. Where
// Table's trie (github.com/gaissmai/bart) takes four levels of nodes
// among a million IPv4 prefixes, each a few cache misses, and shifts a
// node's arrays at every insertion, an Index keeps:
//
//   - the slots, in chunks that never move: each prefix and its value
//     side by side (64 bytes for a value of 40), so that the lookup's last
//     cache miss brings both;
//   - a hash table from each prefix to its slot, for Get, Upsert and
//     Delete (slotTable): one cache line for a prefix not in the index;
//   - per instance ID and address family, a multibit trie of stride 8
//     whose blocks are flat arrays of 256 entries: each entry holds the
//     longest prefix of the block's level that covers it (a prefix is
//     written into every entry it covers, at most 128) and, but at the
//     last level, the block of the next level. A subtree that holds a
//     single prefix is that prefix's slot in place of a block, so that
//     sparse long prefixes (IPv6 hosts) take no blocks. A lookup reads an
//     entry per level and stops at the first without a block; the levels
//     near the root are few and stay in the CPU's caches.
//
// Among a million IPv4 prefixes of /16 to /32, a lookup then costs about
// two cache misses, the last level's block and the slot, and an insertion
// about three (the hash table's line, the block and the entries it
// covers). The blocks and the hash table hold no pointers: the garbage
// collector does not scan them. Memory: about 135 bytes a prefix for such
// prefixes with a value of 8 bytes (the blocks 80, the slot 32, the hash
// table 16 to 32), against about 25 for Table, whose values would be
// apart.
//
// A hash table per prefix length present, probed longest first, would
// answer from the slot alone where a deployment registers few lengths
// (/24 and /32, /48, /64 and /128), but a lookup misses once per length
// it probes: the trie's cost does not grow with the lengths registered.
//
// It is not safe for concurrent writes; lookups may run concurrently with
// each other.
type Index[V any] struct {
	exact  slotTable    // every prefix's slot
	slots  [][]islot[V] // chunks of slotChunk slots
	nslots uint32       // slots made
	free   []uint32     // slots to reuse
	tries  map[tkey]*itrie
	v4iid0 *itrie // tries[{0, false}]: most EIDs are IPv4 without an instance ID
	inner  pool[[blockLen]ientry]
	bottom pool[[blockLen]uint32]
}

// ikey is an EID-prefix as the hash table and the slots keep it: the
// address left-aligned in 128 bits (IPv4 in the top 32), its length, the
// instance ID and the family (0 for a free slot).
type ikey struct {
	hi, lo uint64
	iid    uint32
	bits   uint8
	fam    uint8 // famV4, famV6, or 0 for a free slot
}

const (
	famV4 = 1
	famV6 = 2
)

type tkey struct {
	iid uint32
	fam uint8
}

type islot[V any] struct {
	key ikey
	val V
}

// slotChunk slots make a chunk; slots never move, so that a value's
// address is stable while its prefix is in the index.
const slotChunk = 1 << 12

const (
	blockLen = 256
	// lone marks a child entry that is the slot of the one prefix of its
	// subtree, in place of a block.
	lone = 1 << 31
	// maxSlots bounds the slots, which a leaf entry holds in 29 bits.
	maxSlots = 1<<29 - 2
)

// ientry is an entry of a block above the last level: the leaf of the
// longest prefix of the block's level that covers it, and the block of
// the next level (or lone|slot).
type ientry struct {
	leaf, child uint32
}

// A leaf entry is the slot of a prefix plus one, shifted left by 3, and
// the prefix's length within its level, minus one (0 to 7): 0 is no
// prefix, and an insertion compares lengths without reading the slots.
func leafOf(s uint32, k ikey, lv int) uint32 { return (s+1)<<3 | uint32(int(k.bits)-8*lv-1) }

// leafSlot is the slot of a leaf entry plus one (0 for none).
func leafSlot(l uint32) uint32 { return l >> 3 }

// itrie is the trie of one instance ID and family.
type itrie struct {
	root uint32 // an inner block
	def  uint32 // slot+1 of the prefix of length 0
	last int    // the last level: 3 for IPv4, 15 for IPv6
	n    int
}

// NewIndex returns an empty index.
func NewIndex[V any]() *Index[V] {
	return &Index[V]{exact: newSlotTable(), tries: map[tkey]*itrie{}}
}

// Len is the number of EID-prefixes in the index.
func (x *Index[V]) Len() int { return x.exact.n }

// find looks k up in the hash table: its slot, or where it would go.
func (x *Index[V]) find(k ikey) (pos int, tag, slot uint32, ok bool) {
	h := &x.exact
	tag = h.hash(k)
	mask := len(h.ents) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		e := h.ents[i]
		if e.slot == 0 {
			return i, tag, 0, false
		}
		if e.tag == tag && x.slot(e.slot-1).key == k {
			return i, tag, e.slot - 1, true
		}
	}
}

// keyOf is e's key.
func keyOf(e EID) ikey {
	a := e.Prefix.Addr()
	k := ikey{iid: e.IID, bits: uint8(e.Prefix.Bits())}
	if a.Is4() {
		b := a.As4()
		k.hi, k.fam = uint64(binary.BigEndian.Uint32(b[:]))<<32, famV4
	} else {
		b := a.As16()
		k.hi, k.lo, k.fam = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), famV6
	}
	return k
}

// addrBits is a, left-aligned in 128 bits.
func addrBits(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:])) << 32, 0
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// eid is the EID-prefix of k.
func (k ikey) eid() EID {
	var a netip.Addr
	if k.fam == famV4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(k.hi>>32))
		a = netip.AddrFrom4(b)
	} else {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], k.hi)
		binary.BigEndian.PutUint64(b[8:], k.lo)
		a = netip.AddrFrom16(b)
	}
	return EID{IID: k.iid, Prefix: netip.PrefixFrom(a, int(k.bits))}
}

// masked is k cut to its first n bits.
func (k ikey) masked(n int) ikey {
	hi, lo := mask(k.hi, k.lo, n)
	k.hi, k.lo, k.bits = hi, lo, uint8(n)
	return k
}

func mask(hi, lo uint64, n int) (uint64, uint64) {
	switch {
	case n == 0:
		return 0, 0
	case n < 64:
		return hi &^ (^uint64(0) >> n), 0
	case n < 128:
		return hi, lo &^ (^uint64(0) >> (n - 64))
	}
	return hi, lo
}

// contains reports whether the prefix k holds the address hi, lo.
func (k ikey) contains(hi, lo uint64) bool {
	mhi, mlo := mask(hi, lo, int(k.bits))
	return mhi == k.hi && mlo == k.lo
}

// overlaps reports whether the prefixes k and hi, lo / n share an address.
func (k ikey) overlaps(hi, lo uint64, n int) bool {
	m := min(int(k.bits), n)
	khi, klo := mask(k.hi, k.lo, m)
	ohi, olo := mask(hi, lo, m)
	return khi == ohi && klo == olo
}

// octet is the level-th byte of the address hi, lo.
func octet(hi, lo uint64, level int) uint8 {
	if level < 8 {
		return uint8(hi >> (56 - 8*level))
	}
	return uint8(lo >> (56 - 8*(level-8)))
}

// level is where a prefix of n > 0 bits lies: the level whose byte holds
// its last bit.
func level(n int) int { return (n - 1) / 8 }

func (x *Index[V]) slot(s uint32) *islot[V] { return &x.slots[s/slotChunk][s%slotChunk] }

func (x *Index[V]) trie(iid uint32, fam uint8) *itrie {
	if iid == 0 && fam == famV4 {
		return x.v4iid0
	}
	return x.tries[tkey{iid, fam}]
}

// Get returns the value of exactly e.
func (x *Index[V]) Get(e EID) (*V, bool) {
	_, _, s, ok := x.find(keyOf(e))
	if !ok {
		return nil, false
	}
	return &x.slot(s).val, true
}

// Upsert returns the value of e, adding e with the zero value first when
// it is not in the index. The value stays where it is until e is deleted.
func (x *Index[V]) Upsert(e EID) (v *V, created bool) {
	k := keyOf(e)
	pos, tag, s, ok := x.find(k)
	if ok {
		return &x.slot(s).val, false
	}
	s = x.newSlot(k)
	x.exact.insert(tag, pos, s)
	t := x.trie(k.iid, k.fam)
	if t == nil {
		t = &itrie{root: x.inner.alloc(), last: 3}
		if k.fam == famV6 {
			t.last = 15
		}
		x.tries[tkey{k.iid, k.fam}] = t
		if k.iid == 0 && k.fam == famV4 {
			x.v4iid0 = t
		}
	}
	t.n++
	if k.bits == 0 {
		t.def = s + 1
	} else {
		x.insert(t, t.root, 0, k, s)
	}
	return &x.slot(s).val, true
}

func (x *Index[V]) newSlot(k ikey) uint32 {
	var s uint32
	if n := len(x.free); n > 0 {
		s, x.free = x.free[n-1], x.free[:n-1]
	} else {
		s = x.nslots
		if s >= maxSlots {
			panic("mapping: index full")
		}
		if s%slotChunk == 0 {
			x.slots = append(x.slots, make([]islot[V], slotChunk))
		}
		x.nslots++
	}
	x.slot(s).key = k
	return s
}

// insert places the prefix k of slot s in the trie t, from block b at
// level lv down.
func (x *Index[V]) insert(t *itrie, b uint32, lv int, k ikey, s uint32) {
	target := level(int(k.bits))
	for ; lv < target; lv++ {
		blk := x.inner.block(b)
		o := octet(k.hi, k.lo, lv)
		c := blk[o].child
		switch {
		case c == 0: // the prefix is alone below this entry
			if blk[o].leaf == 0 {
				x.inner.used[b]++
			}
			blk[o].child = lone | s
			return
		case c&lone != 0: // another was alone here: give them a block
			var nb uint32
			if lv+1 == t.last {
				nb = x.bottom.alloc()
			} else {
				nb = x.inner.alloc()
			}
			x.inner.block(b)[o].child = nb
			q := c &^ lone
			x.insert(t, nb, lv+1, x.slot(q).key, q)
			b = nb
		default:
			b = c
		}
	}
	x.fill(t, b, lv, k, s)
}

// fill writes the prefix k of slot s into the entries of block b (at
// its level lv) that it covers, but those of a longer prefix of the level.
func (x *Index[V]) fill(t *itrie, b uint32, lv int, k ikey, s uint32) {
	start, span := entries(k, lv)
	l := leafOf(s, k, lv)
	if lv == t.last {
		blk := x.bottom.block(b)
		for i := start; i < start+span; i++ {
			switch cur := blk[i]; {
			case cur == 0:
				x.bottom.used[b]++
				blk[i] = l
			case cur&7 <= l&7:
				blk[i] = l
			}
		}
		return
	}
	blk := x.inner.block(b)
	for i := start; i < start+span; i++ {
		e := &blk[i]
		switch {
		case e.leaf == 0:
			if e.child == 0 {
				x.inner.used[b]++
			}
			e.leaf = l
		case e.leaf&7 <= l&7:
			e.leaf = l
		}
	}
}

// entries is the range of entries that the prefix k covers in a block at
// its level lv.
func entries(k ikey, lv int) (start, span int) {
	span = 1 << (8*(lv+1) - int(k.bits))
	return int(octet(k.hi, k.lo, lv)), span
}

// Delete removes e and reports whether it was there. Its value is
// cleared.
func (x *Index[V]) Delete(e EID) bool {
	k := keyOf(e)
	pos, _, s, ok := x.find(k)
	if !ok {
		return false
	}
	x.exact.remove(pos)
	t := x.trie(k.iid, k.fam)
	if k.bits == 0 {
		t.def = 0
	} else {
		x.remove(t, k, s)
	}
	if t.n--; t.n == 0 {
		x.inner.release(t.root)
		delete(x.tries, tkey{k.iid, k.fam})
		if t == x.v4iid0 {
			x.v4iid0 = nil
		}
	}
	*x.slot(s) = islot[V]{}
	x.free = append(x.free, s)
	return true
}

// remove takes the prefix k of slot s out of the trie t: its entries get
// the next longer prefix of the level that covers them, and the blocks
// left empty are released.
func (x *Index[V]) remove(t *itrie, k ikey, s uint32) {
	target := level(int(k.bits))
	var path [16]uint32
	b := t.root
	for lv := 0; lv < target; lv++ {
		path[lv] = b
		e := &x.inner.block(b)[octet(k.hi, k.lo, lv)]
		switch c := e.child; {
		case c == lone|s:
			e.child = 0
			if e.leaf == 0 {
				x.inner.used[b]--
			}
			x.prune(t, &path, lv, k)
			return
		case c == 0 || c&lone != 0:
			panic("mapping: index out of step with its hash table")
		default:
			b = c
		}
	}
	path[target] = b
	// The entries of k get the longest prefix of the level that covers
	// k, if any: a shorter one lies in a block above and needs nothing.
	repl := uint32(0)
	for n := int(k.bits) - 1; n > 8*target; n-- {
		m := k.masked(n)
		if _, _, r, ok := x.find(m); ok {
			repl = leafOf(r, m, target)
			break
		}
	}
	old := leafOf(s, k, target)
	start, span := entries(k, target)
	if target == t.last {
		blk := x.bottom.block(b)
		for i := start; i < start+span; i++ {
			if blk[i] == old {
				blk[i] = repl
				if repl == 0 {
					x.bottom.used[b]--
				}
			}
		}
	} else {
		blk := x.inner.block(b)
		for i := start; i < start+span; i++ {
			if e := &blk[i]; e.leaf == old {
				e.leaf = repl
				if repl == 0 && e.child == 0 {
					x.inner.used[b]--
				}
			}
		}
	}
	x.prune(t, &path, target, k)
}

// prune releases the empty blocks of path from level lv up, the root
// excepted.
func (x *Index[V]) prune(t *itrie, path *[16]uint32, lv int, k ikey) {
	for ; lv > 0; lv-- {
		b := path[lv]
		if lv == t.last {
			if x.bottom.used[b] > 0 {
				return
			}
			x.bottom.release(b)
		} else {
			if x.inner.used[b] > 0 {
				return
			}
			x.inner.release(b)
		}
		parent := path[lv-1]
		e := &x.inner.block(parent)[octet(k.hi, k.lo, lv-1)]
		e.child = 0
		if e.leaf == 0 {
			x.inner.used[parent]--
		}
	}
}

// Lookup returns the longest EID-prefix of instance iid that contains a,
// and its value.
func (x *Index[V]) Lookup(iid uint32, a netip.Addr) (EID, *V, bool) {
	fam := uint8(famV6)
	if a.Is4() {
		fam = famV4
	}
	t := x.trie(iid, fam)
	if t == nil {
		return EID{}, nil, false
	}
	hi, lo := addrBits(a)
	s := x.lookup(t, hi, lo)
	if s == 0 {
		return EID{}, nil, false
	}
	sl := x.slot(s - 1)
	return sl.key.eid(), &sl.val, true
}

// LookupValue is Lookup without the EID-prefix.
func (x *Index[V]) LookupValue(iid uint32, a netip.Addr) (*V, bool) {
	fam := uint8(famV6)
	if a.Is4() {
		fam = famV4
	}
	t := x.trie(iid, fam)
	if t == nil {
		return nil, false
	}
	hi, lo := addrBits(a)
	s := x.lookup(t, hi, lo)
	if s == 0 {
		return nil, false
	}
	return &x.slot(s - 1).val, true
}

// Query is an address to look up in an instance ID.
type Query struct {
	IID  uint32
	Addr netip.Addr
}

// Prefetch reads what looking the queries up reads, and nothing else, in
// three passes over up to 64 queries: the first walks each query's trie
// down to the last level (whose blocks near the root stay in the CPU's
// caches), the second reads each query's entry in its block of the last
// level, the third the slot it names. No load of the second and third
// passes depends on another of its pass, and their loops are short, so
// that the CPU overlaps their cache misses (among millions of prefixes,
// a block of the last level and a slot per lookup), which lookups one at
// a time, with other work between them, cannot. It returns a number that
// depends on what it read, so that the reads are not optimized out.
func (x *Index[V]) Prefetch(qs []Query) uint32 {
	var sum uint32
	var at [64]uint64
	var entry, found [64]uint32
	for len(qs) > 0 {
		n := min(len(qs), len(entry))
		for i, q := range qs[:n] {
			at[i], found[i] = x.descend(q)
		}
		for i, a := range at[:n] {
			if a != 0 {
				entry[i] = x.bottom.block(uint32(a >> 8))[uint8(a)]
			} else {
				entry[i] = 0
			}
		}
		for i := range n {
			s := found[i]
			if l := entry[i]; l != 0 {
				s = leafSlot(l)
			}
			if s != 0 {
				sum += uint32(x.slot(s - 1).key.bits)
			}
		}
		qs = qs[n:]
	}
	return sum
}

// PrefetchUpserts reads, as Prefetch does for lookups, what upserting the
// prefixes reads of the index: the hash table's line where each prefix
// is or would go, and the entry of its level's block where it would be
// written (the levels above it stay in the CPU's caches).
func (x *Index[V]) PrefetchUpserts(es []EID) uint32 {
	type target struct {
		block uint32 // 0: none to read
		entry uint8
		last  bool // a block of the last level
	}
	var sum uint32
	var pos [64]int
	var at [64]target
	for len(es) > 0 {
		n := min(len(es), len(pos))
		mask := len(x.exact.ents) - 1
		for i, e := range es[:n] {
			k := keyOf(e)
			pos[i] = int(x.exact.hash(k)) & mask
			at[i] = target{}
			t := x.trie(k.iid, k.fam)
			if t == nil || k.bits == 0 {
				continue
			}
			b, lv := t.root, level(int(k.bits))
			for l := 0; l < lv && b != 0; l++ {
				if c := x.inner.block(b)[octet(k.hi, k.lo, l)].child; c&lone == 0 {
					b = c
				} else {
					b = 0
				}
			}
			at[i] = target{b, octet(k.hi, k.lo, lv), lv == t.last}
		}
		for i := range n {
			sum += x.exact.ents[pos[i]].tag
			switch a := at[i]; {
			case a.block == 0:
			case a.last:
				sum += x.bottom.block(a.block)[a.entry]
			default:
				sum += x.inner.block(a.block)[a.entry].leaf
			}
		}
		es = es[n:]
	}
	return sum
}

// descend walks q's trie as lookup does, down to the last level without
// reading it: it returns the block of the last level and q's entry in it
// (the block shifted by 8, or 0 when the walk stops above), and the
// slot+1 found above: the lone prefix of a subtree, else the longest.
func (x *Index[V]) descend(q Query) (at uint64, found uint32) {
	fam := uint8(famV6)
	if q.Addr.Is4() {
		fam = famV4
	}
	t := x.trie(q.IID, fam)
	if t == nil {
		return 0, 0
	}
	hi, lo := addrBits(q.Addr)
	found = t.def
	b := t.root
	for lv := 0; ; lv++ {
		o := octet(hi, lo, lv)
		if lv == t.last {
			return uint64(b)<<8 | uint64(o), found
		}
		e := x.inner.block(b)[o]
		if e.leaf != 0 {
			found = leafSlot(e.leaf)
		}
		switch c := e.child; {
		case c == 0:
			return 0, found
		case c&lone != 0:
			return 0, c&^lone + 1
		default:
			b = c
		}
	}
}

// lookup returns the slot+1 of the longest prefix of t holding hi, lo, or 0.
func (x *Index[V]) lookup(t *itrie, hi, lo uint64) uint32 {
	best := t.def
	b := t.root
	for lv := 0; ; lv++ {
		o := octet(hi, lo, lv)
		if lv == t.last {
			if l := x.bottom.block(b)[o]; l != 0 {
				best = leafSlot(l)
			}
			return best
		}
		e := x.inner.block(b)[o]
		if e.leaf != 0 {
			best = leafSlot(e.leaf)
		}
		switch c := e.child; {
		case c == 0:
			return best
		case c&lone != 0:
			if x.slot(c&^lone).key.contains(hi, lo) {
				best = c&^lone + 1
			}
			return best
		default:
			b = c
		}
	}
}

// Overlaps reports whether e contains or is contained by an EID-prefix of
// the index.
func (x *Index[V]) Overlaps(e EID) bool {
	k := keyOf(e)
	t := x.trie(k.iid, k.fam)
	switch {
	case t == nil:
		return false
	case t.def != 0 || k.bits == 0:
		return true // the prefix of length 0 covers e, or e covers the n > 0
	}
	target := level(int(k.bits))
	b := t.root
	for lv := 0; lv < target; lv++ {
		e := x.inner.block(b)[octet(k.hi, k.lo, lv)]
		if e.leaf != 0 {
			return true // a shorter prefix covers e
		}
		switch c := e.child; {
		case c == 0:
			return false
		case c&lone != 0:
			return x.slot(c&^lone).key.overlaps(k.hi, k.lo, int(k.bits))
		default:
			b = c
		}
	}
	// In e's level, an entry of its range with a prefix holds one
	// covering e or inside it; one with a block, prefixes inside it.
	start, span := entries(k, target)
	if target == t.last {
		for _, l := range x.bottom.block(b)[start : start+span] {
			if l != 0 {
				return true
			}
		}
		return false
	}
	for _, e := range x.inner.block(b)[start : start+span] {
		if e.leaf != 0 || e.child != 0 {
			return true
		}
	}
	return false
}

// Gap is Table.Gap: the least-specific prefix that contains a, lies
// inside within, and overlaps no EID-prefix of the index. a must not be
// covered by the index, and within must contain a.
func (x *Index[V]) Gap(within EID, a netip.Addr) EID { return gap(x, within, a) }

// All iterates over every EID-prefix and its value, in no particular
// order.
func (x *Index[V]) All() iter.Seq2[EID, *V] {
	return func(yield func(EID, *V) bool) {
		for s := range x.nslots {
			sl := x.slot(s)
			if sl.key.fam != 0 && !yield(sl.key.eid(), &sl.val) {
				return
			}
		}
	}
}

// pool holds blocks of one kind in chunks that never move, with how many
// of each block's entries are in use.
type pool[B any] struct {
	chunks [][]B
	used   []uint16
	free   []uint32
}

const blockChunk = 64

// alloc returns an empty block. Block 0 is never handed out: 0 means no
// block.
func (p *pool[B]) alloc() uint32 {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	if len(p.used) == 0 {
		p.chunks = append(p.chunks, make([]B, blockChunk))
		p.used = append(p.used, 0)
	}
	b := uint32(len(p.used))
	if b%blockChunk == 0 {
		p.chunks = append(p.chunks, make([]B, blockChunk))
	}
	p.used = append(p.used, 0)
	return b
}

func (p *pool[B]) block(b uint32) *B { return &p.chunks[b/blockChunk][b%blockChunk] }

// release returns a block, which must be empty, to the pool.
func (p *pool[B]) release(b uint32) {
	var zero B
	*p.block(b) = zero
	p.used[b] = 0
	p.free = append(p.free, b)
}
