package te

import (
	"errors"
	"time"
)

// Slots are the ELPs of one destination in the order Map-Replies list
// them. A router that tells ELPs apart by path ID (the ELP's position in
// the reply, [LISP-TE] §III.B.1) must find the same ELP at the same
// position as the ITR that wrote it, whenever each of them asked: so an
// ELP keeps its slot while any source uses it, and a slot no source uses
// any more keeps its ELP for Linger (at least the TTL of the replies that
// carried it) before another ELP may take it. Slots are not safe for
// concurrent use.
type Slots[T any] struct {
	// Max is the most slots (the data plane's paths per mapping).
	Max int
	// Linger is how long a retired slot keeps its ELP.
	Linger time.Duration
	slots  []Slot[T]
}

// Slot is one position of the list: its ELP (Key names it, Value is what
// replies carry), how many sources use it and, when none does, since
// when. A slot with an empty Key is free.
type Slot[T any] struct {
	Key     string
	Value   T
	Users   int
	Retired time.Time
}

// ErrFull is Acquire's error when every slot holds an ELP that may not
// be replaced yet.
var ErrFull = errors.New("every path slot of the destination is in use")

// Acquire counts one more user of the ELP key, in the slot that holds it
// (in use, or retired and taken back), else in the first free slot, else
// in a new one at the end. It returns the slot's index.
func (s *Slots[T]) Acquire(now time.Time, key string, value T) (int, error) {
	free := -1
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.Key == key {
			sl.Users++
			sl.Value = value
			return i, nil
		}
		if free < 0 && s.reusable(sl, now) {
			free = i
		}
	}
	if free < 0 {
		if len(s.slots) >= s.Max {
			return -1, ErrFull
		}
		s.slots = append(s.slots, Slot[T]{})
		free = len(s.slots) - 1
	}
	s.slots[free] = Slot[T]{Key: key, Value: value, Users: 1}
	return free, nil
}

// reusable says whether a slot may take another ELP.
func (s *Slots[T]) reusable(sl *Slot[T], now time.Time) bool {
	return sl.Key == "" || (sl.Users == 0 && now.Sub(sl.Retired) >= s.Linger)
}

// Release counts one user less of slot i; with none left, the slot is
// retired at now.
func (s *Slots[T]) Release(now time.Time, i int) {
	if i < 0 || i >= len(s.slots) || s.slots[i].Users == 0 {
		return
	}
	if s.slots[i].Users--; s.slots[i].Users == 0 {
		s.slots[i].Retired = now
	}
}

// Sweep frees the slots retired for Linger and drops the free slots at
// the end of the list. It reports whether the list changed.
func (s *Slots[T]) Sweep(now time.Time) bool {
	changed := false
	for i := range s.slots {
		if sl := &s.slots[i]; sl.Key != "" && sl.Users == 0 && now.Sub(sl.Retired) >= s.Linger {
			s.slots[i] = Slot[T]{}
			changed = true
		}
	}
	n := len(s.slots)
	for n > 0 && s.slots[n-1].Key == "" {
		n--
	}
	clear(s.slots[n:])
	s.slots = s.slots[:n]
	return changed
}

// All returns the slots, in order. The slice is the Slots' own: read it,
// do not keep it.
func (s *Slots[T]) All() []Slot[T] { return s.slots }

// Len is the number of slots, free ones inside the list included.
func (s *Slots[T]) Len() int { return len(s.slots) }
