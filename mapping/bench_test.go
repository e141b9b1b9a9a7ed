package mapping

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// million draws 1M distinct IPv4 prefixes of lengths /16 to /32 inside
// 10.0.0.0/8 and 100.64.0.0/10, as the map-request benchmark registers,
// into add, which size counts, and returns 64K addresses inside them.
func million(add func(EID), size func() int) []netip.Addr {
	r := rand.New(rand.NewPCG(3, 4))
	var probes []netip.Addr
	for size() < 1_000_000 {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		if r.IntN(4) == 0 {
			a = netip.AddrFrom4([4]byte{100, 64 | byte(r.IntN(64)), byte(r.IntN(256)), byte(r.IntN(256))})
		}
		p, _ := a.Prefix(16 + r.IntN(17))
		add(NewEID(0, p))
		if len(probes) < 1<<16 {
			probes = append(probes, a)
		}
	}
	return probes
}

// bench1M fills a table with million's prefixes and measures its lookups
// and gaps, and the heap a prefix takes. It returns million's addresses.
func bench1M(b *testing.B, add func(EID), size func() int, lookup func(netip.Addr) bool, gap func(EID, netip.Addr) EID) []netip.Addr {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	probes := million(add, size)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPrefix := float64(after.HeapAlloc-before.HeapAlloc) / float64(size())
	b.Run("Lookup", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if !lookup(probes[i&(len(probes)-1)]) {
				b.Fatal("probe not found")
			}
			i++
		}
		b.ReportMetric(perPrefix, "heap-bytes/prefix")
	})
	b.Run("Gap", func(b *testing.B) {
		all := NewEID(0, netip.MustParsePrefix("0.0.0.0/0"))
		for b.Loop() {
			gap(all, netip.MustParseAddr("192.0.2.1"))
		}
	})
	return probes
}

func BenchmarkTable1M(b *testing.B) {
	tab := NewTable[int]()
	bench1M(b, func(e EID) { tab.Insert(e, tab.Len()) }, tab.Len,
		func(a netip.Addr) bool { _, ok := tab.Lookup(0, a); return ok }, tab.Gap)
}

func BenchmarkIndex1M(b *testing.B) {
	x := NewIndex[int]()
	probes := bench1M(b, func(e EID) { v, _ := x.Upsert(e); *v = x.Len() }, x.Len,
		func(a netip.Addr) bool { _, ok := x.LookupValue(0, a); return ok }, x.Gap)
	// Lookups in batches of 64, each batch read ahead first, as the
	// map-resolver's loop does (ns a lookup). The probes are shuffled: in
	// the order drawn, as Lookup takes them, their slots come in sequence.
	r := rand.New(rand.NewPCG(5, 6))
	r.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
	qs := make([]Query, len(probes))
	for i, a := range probes {
		qs[i] = Query{Addr: a}
	}
	b.Run("PrefetchedLookup", func(b *testing.B) {
		i := 0
		for b.Loop() {
			batch := qs[i : i+64]
			x.Prefetch(batch)
			for _, q := range batch {
				if _, ok := x.LookupValue(q.IID, q.Addr); !ok {
					b.Fatal("probe not found")
				}
			}
			i = (i + 64) & (len(qs) - 1)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/lookup")
	})
}

// BenchmarkInsert1M inserts million's prefixes, a new table every 1M.
func BenchmarkInsert1M(b *testing.B) {
	var eids []EID
	seen := map[EID]bool{}
	million(func(e EID) {
		if !seen[e] {
			seen[e] = true
			eids = append(eids, e)
		}
	}, func() int { return len(eids) })
	b.Run("Table", func(b *testing.B) {
		var tab *Table[int]
		i := 0
		for b.Loop() {
			if i%len(eids) == 0 {
				tab = NewTable[int]()
			}
			tab.Insert(eids[i%len(eids)], i)
			i++
		}
	})
	b.Run("Index", func(b *testing.B) {
		var x *Index[int]
		i := 0
		for b.Loop() {
			if i%len(eids) == 0 {
				x = NewIndex[int]()
			}
			v, _ := x.Upsert(eids[i%len(eids)])
			*v = i
			i++
		}
	})
}

// lookupByLength is the alternative to the Index's trie that
// BenchmarkLookupByLength measures: its hash table probed at each
// length present, longest first.
func (x *Index[V]) lookupByLength(lengths []int, iid uint32, a netip.Addr) (*V, bool) {
	k := keyOf(HostEID(iid, a))
	for _, n := range lengths {
		if _, _, s, ok := x.find(k.masked(n)); ok {
			return &x.slot(s).val, true
		}
	}
	return nil, false
}

// BenchmarkLookupByLength compares the trie's lookups with probing a hash
// table per length, among 1M IPv4 prefixes of /16 to /32 (17 lengths, as
// amptcp bench map-request registers) and of /24 and /32 spread over the
// address space (2 lengths, as a deployment might).
func BenchmarkLookupByLength(b *testing.B) {
	for _, tc := range []struct {
		name    string
		lengths []int
		addr    func(r *rand.Rand) netip.Addr
	}{
		{"17-lengths", []int{32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16}, func(r *rand.Rand) netip.Addr {
			return netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		}},
		{"2-lengths", []int{32, 24}, func(r *rand.Rand) netip.Addr {
			return netip.AddrFrom4([4]byte{byte(r.IntN(224)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		}},
	} {
		r := rand.New(rand.NewPCG(3, 4))
		x := NewIndex[int]()
		var probes []netip.Addr
		for x.Len() < 1_000_000 {
			a := tc.addr(r)
			p, _ := a.Prefix(tc.lengths[r.IntN(len(tc.lengths))])
			x.Upsert(NewEID(0, p))
			if len(probes) < 1<<18 {
				probes = append(probes, a)
			}
		}
		b.Run(tc.name+"/trie", func(b *testing.B) {
			i := 0
			for b.Loop() {
				v, ok := x.LookupValue(0, probes[i%len(probes)])
				if !ok {
					b.Fatal("not found")
				}
				_ = *v
				i++
			}
		})
		b.Run(tc.name+"/by-length", func(b *testing.B) {
			i := 0
			for b.Loop() {
				v, ok := x.lookupByLength(tc.lengths, 0, probes[i%len(probes)])
				if !ok {
					b.Fatal("not found")
				}
				_ = *v
				i++
			}
		})
	}
}
