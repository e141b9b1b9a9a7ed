package mapping

import (
	"math/bits"
	"math/rand/v2"
)

// slotTable is the Index's hash table from EID-prefixes to their slots:
// open addressing with linear probing over entries of 8 bytes, the slot
// and 32 bits of the key's hash, so that a probe for a prefix not in the
// index reads one cache line and no slot, and growing reads no key.
// Deleting shifts the entries that follow back (no tombstones).
type slotTable struct {
	ents []hent // a power of two long
	n    int
	seed uint64
}

// hent is an entry: the slot plus one (0: empty) and the upper 32 bits
// of the key's hash, whose low bits place the entry.
type hent struct {
	slot, tag uint32
}

func newSlotTable() slotTable {
	return slotTable{ents: make([]hent, 16), seed: rand.Uint64() | 1}
}

// hash mixes a key's fields (wyhash's multiply-fold), seeded per table:
// prefixes chosen to collide in one process do not in another.
func (h *slotTable) hash(k ikey) uint32 {
	meta := uint64(k.iid)<<16 | uint64(k.bits)<<8 | uint64(k.fam)
	a := mix(k.hi^h.seed, k.lo^0x9e3779b97f4a7c15)
	return uint32(mix(a^meta, h.seed^0xbf58476d1ce4e5b9) >> 32)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// insert puts slot s of k at pos, where find said k would go, growing the
// table beyond three quarters full.
func (h *slotTable) insert(tag uint32, pos int, s uint32) {
	h.ents[pos] = hent{s + 1, tag}
	if h.n++; h.n*4 > len(h.ents)*3 {
		old := h.ents
		h.ents = make([]hent, 2*len(old))
		mask := len(h.ents) - 1
		for _, e := range old {
			if e.slot == 0 {
				continue
			}
			i := int(e.tag) & mask
			for h.ents[i].slot != 0 {
				i = (i + 1) & mask
			}
			h.ents[i] = e
		}
	}
}

// remove empties position pos and moves back the entries after it that
// their own position no longer separates from it.
func (h *slotTable) remove(pos int) {
	mask := len(h.ents) - 1
	h.n--
	for i := (pos + 1) & mask; h.ents[i].slot != 0; i = (i + 1) & mask {
		home := int(h.ents[i].tag) & mask
		// The entry at i may fill pos if its home is not in (pos, i].
		if (i-home)&mask >= (i-pos)&mask {
			h.ents[pos] = h.ents[i]
			pos = i
		}
	}
	h.ents[pos] = hent{}
}
