package mapping

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// prefixDraw draws EID-prefixes for the index's property tests.
type prefixDraw func(r *rand.Rand) EID

// The distributions the index must handle alike: randomEID's small space,
// where prefixes of every length nest and collide; lengths from 0 to
// the whole address over a wider space; hosts spread thinly (the single
// prefixes of subtrees); and few lengths, as deployments register.
var prefixDraws = map[string]prefixDraw{
	"nested": randomEID,
	"every-length": func(r *rand.Rand) EID {
		iid := uint32(r.IntN(3))
		if r.IntN(2) == 0 {
			a := netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(8)), byte(r.IntN(256)), byte(r.IntN(256))})
			p, _ := a.Prefix(r.IntN(33))
			return EID{iid, p}
		}
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(3))
		}
		p, _ := netip.AddrFrom16(b).Prefix(r.IntN(129))
		return EID{iid, p}
	},
	"sparse-hosts": func(r *rand.Rand) EID {
		if r.IntN(2) == 0 {
			a := netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(4)), byte(r.IntN(256))})
			p, _ := a.Prefix(28 + r.IntN(5))
			return EID{0, p}
		}
		a := netip.AddrFrom16([16]byte{0x20, 0x01, byte(r.IntN(256)), byte(r.IntN(4)), 9: byte(r.IntN(256)), 15: byte(r.IntN(256))})
		p, _ := a.Prefix(120 + r.IntN(9))
		return EID{0, p}
	},
	"few-lengths": func(r *rand.Rand) EID {
		if r.IntN(2) == 0 {
			a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(16)), byte(r.IntN(256))})
			p, _ := a.Prefix([]int{16, 24, 32}[r.IntN(3)])
			return EID{0, p}
		}
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(r.IntN(4)), 7: byte(r.IntN(4)), 15: byte(r.IntN(256))})
		p, _ := a.Prefix([]int{48, 64, 128}[r.IntN(3)])
		return EID{0, p}
	},
}

// addrNear is an address inside or next to e, where lookups find e or
// its neighbours.
func addrNear(r *rand.Rand, e EID) netip.Addr {
	b := e.Prefix.Addr().AsSlice()
	for i := e.Prefix.Bits() / 8; i < len(b); i++ {
		b[i] = byte(r.IntN(256))
	}
	if r.IntN(4) == 0 {
		b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// The index agrees with the trie (Table) on every operation the
// map-server uses, through random inserts and deletes of prefixes of each
// distribution, and gives back every block once emptied.
func TestIndexMatchesTable(t *testing.T) {
	for name, draw := range prefixDraws {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(len(name))))
			x, tab := NewIndex[EID](), NewTable[EID]()
			var live []EID
			for step := range 30000 {
				e := draw(r)
				if r.IntN(3) == 0 && len(live) > 0 {
					e = live[r.IntN(len(live))]
				}
				if r.IntN(3) == 0 {
					if got, want := x.Delete(e), tab.Delete(e); got != want {
						t.Fatalf("step %d: Delete(%s) = %v, want %v", step, e, got, want)
					}
				} else {
					x.PrefetchUpserts([]EID{e, draw(r)})
					v, created := x.Upsert(e)
					_, wantCreated := tab.Upsert(e, func() EID { return e })
					if created != wantCreated || (!created && *v != e) {
						t.Fatalf("step %d: Upsert(%s) = %s, %v; want created %v", step, e, *v, created, wantCreated)
					}
					*v = e
					if created {
						live = append(live, e)
					}
				}
				compareIndex(t, step, x, tab, e, r)
			}
			n := 0
			for e, v := range x.All() {
				if w, ok := tab.Get(e); !ok || *v != e || w != e {
					t.Fatalf("All yields %s=%s, not in the table", e, *v)
				}
				n++
			}
			if n != tab.Len() {
				t.Fatalf("All yielded %d, the table has %d", n, tab.Len())
			}
			for e := range tab.All() {
				x.Delete(e)
			}
			if x.Len() != 0 || len(x.tries) != 0 || x.v4iid0 != nil || x.inner.live() != 0 || x.bottom.live() != 0 {
				t.Fatalf("emptied: %d prefixes, %d tries, %d inner and %d bottom blocks live",
					x.Len(), len(x.tries), x.inner.live(), x.bottom.live())
			}
		})
	}
}

func compareIndex(t *testing.T, step int, x *Index[EID], tab *Table[EID], e EID, r *rand.Rand) {
	t.Helper()
	if x.Len() != tab.Len() {
		t.Fatalf("step %d: Len = %d, want %d", step, x.Len(), tab.Len())
	}
	v, ok := x.Get(e)
	if w, wok := tab.Get(e); ok != wok || (ok && *v != w) {
		t.Fatalf("step %d: Get(%s) = %v, want %v", step, e, ok, wok)
	}
	// Prefetch reads the slots that the lookups read: those of the
	// prefixes found, and a subtree's lone prefix checked and not found.
	var qs []Query
	var bits uint32 // of the prefixes the queries find
	defer func() {
		if got := x.Prefetch(qs); got < bits {
			t.Fatalf("step %d: Prefetch(%v) = %d, the lookups found prefixes of %d bits in all", step, qs, got, bits)
		}
	}()
	for range 4 {
		a := addrNear(r, e)
		if r.IntN(8) == 0 {
			a = addrNear(r, randomEID(r))
		}
		ge, gv, gok := x.Lookup(e.IID, a)
		w, wok := tab.Lookup(e.IID, a)
		if gok != wok || (gok && (ge != w || *gv != w)) {
			t.Fatalf("step %d: Lookup([%d]%s) = %s %v; want %s %v", step, e.IID, a, ge, gok, w, wok)
		}
		qs = append(qs, Query{e.IID, a})
		if gok {
			bits += uint32(ge.Prefix.Bits())
		}
		if gv, gok := x.LookupValue(e.IID, a); gok != wok || (gok && *gv != w) {
			t.Fatalf("step %d: LookupValue([%d]%s) = %v; want %s %v", step, e.IID, a, gok, w, wok)
		}
		p, _ := a.Prefix(r.IntN(a.BitLen() + 1))
		q := EID{e.IID, p}
		if got, want := x.Overlaps(q), tab.Overlaps(q); got != want {
			t.Fatalf("step %d: Overlaps(%s) = %v, want %v", step, q, got, want)
		}
		if !wok {
			all := NewEID(e.IID, netip.PrefixFrom(a, 0))
			if got, want := x.Gap(all, a), tab.Gap(all, a); got != want {
				t.Fatalf("step %d: Gap([%d]%s) = %s, want %s", step, e.IID, a, got, want)
			}
		}
	}
}

// live is how many blocks are in use.
func (p *pool[B]) live() int { return max(0, len(p.used)-1-len(p.free)) }
