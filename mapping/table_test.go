package mapping

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// naive is the reference model: a list, searched linearly.
type naive map[EID]int

func (n naive) lookup(iid uint32, a netip.Addr) (EID, bool) {
	var best EID
	found := false
	for e := range n {
		if e.IID == iid && e.Prefix.Contains(a) && (!found || e.Prefix.Bits() > best.Prefix.Bits()) {
			best, found = e, true
		}
	}
	return best, found
}

func (n naive) overlaps(q EID) bool {
	for e := range n {
		if e.IID == q.IID && e.Prefix.Overlaps(q.Prefix) {
			return true
		}
	}
	return false
}

// randomEID draws prefixes from a small space so that they nest and
// collide often: two instances, IPv4 and IPv6.
func randomEID(r *rand.Rand) EID {
	iid := uint32(r.IntN(2)) * 1000
	if r.IntN(2) == 0 {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
		p, _ := a.Prefix(8 + r.IntN(25))
		return EID{iid, p}
	}
	a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), byte(r.IntN(256)), 15: byte(r.IntN(256))})
	p, _ := a.Prefix(32 + r.IntN(97))
	return EID{iid, p}
}

func randomAddr(r *rand.Rand) (uint32, netip.Addr) {
	e := randomEID(r)
	a := e.Prefix.Addr().As16()
	if e.Prefix.Addr().Is4() {
		a4 := e.Prefix.Addr().As4()
		a4[3] = byte(r.IntN(256))
		return e.IID, netip.AddrFrom4(a4)
	}
	a[15] = byte(r.IntN(256))
	return e.IID, netip.AddrFrom16(a)
}

// The table agrees with the naive list on every operation, through random
// inserts, deletes and queries.
func TestTableMatchesNaiveList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// The table's values are the EIDs themselves, so that lookups can be
	// compared with the reference by prefix.
	tab, ref := NewTable[EID](), naive{}
	for step := range 20000 {
		e := randomEID(r)
		switch r.IntN(5) {
		case 4:
			v, created := tab.Upsert(e, func() EID { return e })
			if created != (ref[e] == 0) || v != e {
				t.Fatalf("step %d: Upsert(%s) = %s, %v; present before: %v", step, e, v, created, ref[e] != 0)
			}
			if created {
				ref[e] = step + 1
			}
		case 0:
			if got, want := tab.Delete(e), ref[e] != 0; got != want {
				t.Fatalf("step %d: Delete(%s) = %v, want %v", step, e, got, want)
			}
			delete(ref, e)
		default:
			tab.Insert(e, e)
			ref[e] = step + 1
		}
		if tab.Len() != len(ref) {
			t.Fatalf("step %d: Len = %d, want %d", step, tab.Len(), len(ref))
		}
		if v, ok := tab.Get(e); ok != (ref[e] != 0) || (ok && v != e) {
			t.Fatalf("step %d: Get(%s) = %s, %v; want present %v", step, e, v, ok, ref[e] != 0)
		}
		iid, a := randomAddr(r)
		ge, gok := tab.Lookup(iid, a)
		we, wok := ref.lookup(iid, a)
		if gok != wok || ge != we {
			t.Fatalf("step %d: Lookup([%d]%s) = %s %v; want %s %v", step, iid, a, ge, gok, we, wok)
		}
		if ce, cv, cok := tab.Covering(HostEID(iid, a)); cok != wok || ce != we || cv != we {
			t.Fatalf("step %d: Covering([%d]%s) = %s %v; want %s", step, iid, a, ce, cok, we)
		}
		if got, want := tab.Overlaps(e), ref.overlaps(e); got != want {
			t.Fatalf("step %d: Overlaps(%s) = %v, want %v", step, e, got, want)
		}
		if !gok {
			checkGap(t, tab, ref, iid, a)
		}
	}
	n := 0
	for e, v := range tab.All() {
		if ref[e] == 0 || v != e {
			t.Fatalf("All yields %s=%s, not in the reference", e, v)
		}
		n++
	}
	if n != len(ref) {
		t.Fatalf("All yielded %d entries, want %d", n, len(ref))
	}
}

// checkGap compares Gap with a brute-force search for the shortest prefix
// of a that overlaps nothing in the reference.
func checkGap(t *testing.T, tab *Table[EID], ref naive, iid uint32, a netip.Addr) {
	t.Helper()
	all := NewEID(iid, netip.PrefixFrom(a, 0))
	got := tab.Gap(all, a)
	for m := 0; m <= a.BitLen(); m++ {
		p, _ := a.Prefix(m)
		if !ref.overlaps(EID{iid, p}) {
			if want := (EID{iid, p}); got != want {
				t.Fatalf("Gap([%d]%s) = %s, want %s", iid, a, got, want)
			}
			return
		}
	}
	t.Fatalf("no gap for [%d]%s", iid, a)
}

func TestGapWorkedExample(t *testing.T) {
	tab := NewTable[int]()
	tab.Insert(NewEID(0, netip.MustParsePrefix("10.1.0.0/16")), 1)
	tab.Insert(NewEID(0, netip.MustParsePrefix("192.168.0.0/24")), 2)
	all := NewEID(0, netip.MustParsePrefix("0.0.0.0/0"))
	// 10.0.0.1 shares 15 bits with 10.1.0.0/16: the gap is 10.0.0.0/16.
	if got := tab.Gap(all, netip.MustParseAddr("10.0.0.1")); got.String() != "10.0.0.0/16" {
		t.Errorf("Gap(10.0.0.1) = %s, want 10.0.0.0/16", got)
	}
	// 172.16.0.1 shares one bit with 192.168/24 and none with 10/8.
	if got := tab.Gap(all, netip.MustParseAddr("172.16.0.1")); got.String() != "128.0.0.0/2" {
		t.Errorf("Gap(172.16.0.1) = %s, want 128.0.0.0/2", got)
	}
	// Inside a configured 10.0.0.0/8 with 10.1.0.0/16 registered.
	within := NewEID(0, netip.MustParsePrefix("10.0.0.0/8"))
	if got := tab.Gap(within, netip.MustParseAddr("10.200.0.1")); got.String() != "10.128.0.0/9" {
		t.Errorf("Gap(10.200.0.1 within 10/8) = %s, want 10.128.0.0/9", got)
	}
}

func TestEIDWireRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		eid  EID
		text string
	}{
		{NewEID(0, netip.MustParsePrefix("10.1.0.0/16")), "10.1.0.0/16"},
		{NewEID(1000, netip.MustParsePrefix("10.1.0.0/16")), "[1000]10.1.0.0/16"},
		{NewEID(7, netip.MustParsePrefix("2001:db8::/32")), "[7]2001:db8::/32"},
	} {
		a, ml := tc.eid.Wire()
		back, err := FromWire(a, ml)
		if err != nil || back != tc.eid || back.String() != tc.text {
			t.Errorf("%s: Wire then FromWire = %s, %v", tc.text, back, err)
		}
	}
	if _, err := FromWire(lisp.NameAddress("x"), 0); err == nil {
		t.Error("a name EID was accepted")
	}
	if _, err := FromWire(lisp.MustParseAddress("10.0.0.0"), 33); err == nil {
		t.Error("mask-len 33 was accepted")
	}
}
