package mapping

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// million fills a table with 1M IPv4 prefixes of lengths /16 to /32 inside
// 10.0.0.0/8 and 100.64.0.0/10, as the map-request benchmark registers.
func million(b *testing.B) (*Table[int], []netip.Addr) {
	r := rand.New(rand.NewPCG(3, 4))
	tab := NewTable[int]()
	var probes []netip.Addr
	for tab.Len() < 1_000_000 {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		if r.IntN(4) == 0 {
			a = netip.AddrFrom4([4]byte{100, 64 | byte(r.IntN(64)), byte(r.IntN(256)), byte(r.IntN(256))})
		}
		p, _ := a.Prefix(16 + r.IntN(17))
		tab.Insert(NewEID(0, p), tab.Len())
		if len(probes) < 1<<16 {
			probes = append(probes, a)
		}
	}
	return tab, probes
}

func BenchmarkTable1M(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab, probes := million(b)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPrefix := float64(after.HeapAlloc-before.HeapAlloc) / float64(tab.Len())
	b.Run("Lookup", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := tab.Lookup(0, probes[i&(len(probes)-1)]); !ok {
				b.Fatal("probe not found")
			}
			i++
		}
		b.ReportMetric(perPrefix, "heap-bytes/prefix")
	})
	b.Run("Gap", func(b *testing.B) {
		all := NewEID(0, netip.MustParsePrefix("0.0.0.0/0"))
		for b.Loop() {
			tab.Gap(all, netip.MustParseAddr("192.0.2.1"))
		}
	})
}
