package te

import (
	"errors"
	"testing"
	"time"
)

func keys[T any](s *Slots[T]) []string {
	var out []string
	for _, sl := range s.All() {
		out = append(out, sl.Key)
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSlots: an ELP keeps its position while used and for Linger after;
// only then may another take it; the list never reorders.
func TestSlots(t *testing.T) {
	s := &Slots[int]{Max: 3, Linger: 5 * time.Minute}
	t0 := time.Unix(0, 0)
	for i, k := range []string{"a", "b", "c"} {
		if got, err := s.Acquire(t0, k, i); got != i || err != nil {
			t.Fatalf("acquire %s: %d %v", k, got, err)
		}
	}
	if i, _ := s.Acquire(t0, "b", 1); i != 1 || s.All()[1].Users != 2 {
		t.Fatalf("second user of b: slot %d, users %d", i, s.All()[1].Users)
	}
	if _, err := s.Acquire(t0, "d", 3); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth ELP: %v", err)
	}
	s.Release(t0, 0)
	if _, err := s.Acquire(t0.Add(4*time.Minute), "d", 3); !errors.Is(err, ErrFull) {
		t.Fatalf("a's slot reused before Linger: %v", err)
	}
	if i, _ := s.Acquire(t0.Add(4*time.Minute), "a", 0); i != 0 {
		t.Fatalf("a taken back in slot %d", i)
	}
	s.Release(t0.Add(4*time.Minute), 0)
	if s.Sweep(t0.Add(8*time.Minute)) || !eq(keys(s), []string{"a", "b", "c"}) {
		t.Fatalf("swept early: %v", keys(s))
	}
	if i, err := s.Acquire(t0.Add(9*time.Minute), "d", 3); i != 0 || err != nil {
		t.Fatalf("d: slot %d %v, want a's", i, err)
	}
	s.Release(t0, 2)
	if !s.Sweep(t0.Add(time.Hour)) || !eq(keys(s), []string{"d", "b"}) {
		t.Fatalf("after the sweep: %v, want d, b (the free end dropped)", keys(s))
	}
	s.Release(t0, 0)
	s.Release(t0, 0) // no users left: nothing happens
	s.Sweep(t0.Add(time.Hour))
	if !eq(keys(s), []string{"", "b"}) {
		t.Fatalf("a free slot inside the list stays: %v", keys(s))
	}
}
