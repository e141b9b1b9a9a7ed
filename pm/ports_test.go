package pm

import (
	"math/rand/v2"
	"testing"
)

// Every candidate is in the range, has the residue a port-sum xTR reads
// ((sport + dport) mod P), comes once, and all such ports come, whatever
// the start.
func TestPortCandidatesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		lo := uint16(1024 + rng.IntN(60000))
		r := portRange{lo, lo + uint16(rng.IntN(int(65535-lo)+1))}
		dport := uint16(rng.IntN(65536))
		p := 1 + rng.IntN(12)
		residue := rng.IntN(p)
		cands := newPortCandidates(r, dport, p, residue, rng.Int())
		seen := map[uint16]bool{}
		for {
			port, ok := cands.get()
			if !ok {
				break
			}
			if port < r.lo || port > r.hi || (int(port)+int(dport))%p != residue || seen[port] {
				t.Fatalf("range %v dport %d P %d residue %d: candidate %d (seen %v)", r, dport, p, residue, port, seen[port])
			}
			seen[port] = true
		}
		want := 0
		for port := int(r.lo); port <= int(r.hi); port++ {
			if (port+int(dport))%p == residue {
				want++
			}
		}
		if len(seen) != want {
			t.Fatalf("range %v dport %d P %d residue %d: %d candidates, want %d", r, dport, p, residue, len(seen), want)
		}
	}
}

// The candidates after a port in use are P apart, wrapping at the end of
// the range.
func TestPortCandidatesWrap(t *testing.T) {
	c := newPortCandidates(portRange{40000, 40010}, 0, 4, 1, 2)
	var got []uint16
	for {
		p, ok := c.get()
		if !ok {
			break
		}
		got = append(got, p)
	}
	want := []uint16{40009, 40001, 40005}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("candidates %v, want %v", got, want)
	}
	if c := newPortCandidates(portRange{40000, 40000}, 0, 4, 1, 0); c.left != 0 {
		t.Errorf("a range without the residue has %d candidates", c.left)
	}
}
