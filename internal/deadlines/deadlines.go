// Package deadlines keeps items in the order they fall due, and takes out
// or moves any one of them in O(log n), a move to a later time in O(1):
// what the map-server's registrations and the map-cache's entries expire
// by.
package deadlines

import (
	"math"
	"slices"
	"time"
)

// Slot is where a Queue keeps an item's place; an item embeds one. Its
// zero value is "not queued".
type Slot struct{ pos int } // index + 1

func (s *Slot) slot() *Slot { return s }

// Item is what a Queue holds: a pointer to a struct that embeds a Slot
// and says when it falls due.
type Item interface {
	Due() time.Time
	slot() *Slot
}

// Queue orders items by Due, the earliest first. An item is in it at
// most once. It keeps each item's due time beside it, so that ordering
// them reads no item: among a million registrations, each item read is a
// cache miss.
type Queue[T Item] struct{ h items[T] }

// entry is a queued item and its due time, as the time since epoch
// (monotonic when both have a monotonic reading, as time.Time.Before
// compares them).
type entry[T Item] struct {
	due  time.Duration
	item T
}

// epoch is what due times are kept relative to.
var epoch = time.Now()

func entryOf[T Item](x T) entry[T] { return entry[T]{x.Due().Sub(epoch), x} }

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return len(q.h) }

// Schedule queues x, or moves it to its new due time if it is queued.
//
// A move to a later time is put off: the entry keeps the earlier time,
// a bound on the item's own, and the item takes its place when it
// reaches the front (settle). A refreshed registration moves later, and
// sifting it down a heap of a million, every level a cache miss and a
// write to the item it swaps with, cost the map-server a quarter of its
// work on a refresh. Now a refresh costs a comparison, and the item moves
// when its old time comes: with RFC 9301's minute between refreshes and
// three minutes' lifetime, every two to three minutes, not every minute.
func (q *Queue[T]) Schedule(x T) {
	if pos := x.slot().pos; pos > 0 {
		e := &q.h[pos-1]
		if due := x.Due().Sub(epoch); due < e.due {
			e.due = due
			q.h.up(pos - 1)
		}
		return
	}
	q.h.push(entryOf(x))
}

// Remove takes x out of the queue, if it is in it.
func (q *Queue[T]) Remove(x T) {
	if pos := x.slot().pos; pos > 0 {
		q.h.remove(pos - 1)
	}
}

// First is the item that falls due first; ok is false when none is
// queued.
func (q *Queue[T]) First() (x T, ok bool) {
	if !q.settle(math.MaxInt64) {
		return x, false
	}
	return q.h[0].item, true
}

// Due takes out and returns the first item if it is due at now.
func (q *Queue[T]) Due(now time.Time) (x T, ok bool) {
	// Only what the front's entries say is due is settled: settling the
	// front whatever its time would make the first call after a million
	// refreshes move them all.
	if !q.settle(now.Sub(epoch)) || q.h[0].item.Due().After(now) {
		return x, false
	}
	return q.h.remove(0).item, true
}

// settle moves the items at the front whose moves Schedule put off to
// their due times, until the front's entry holds its item's own time or
// a time after until: as every entry's time is at most its item's, the
// front is then the item due first, or none is due by until. It reports
// whether the front is its item's, due by until.
func (q *Queue[T]) settle(until time.Duration) bool {
	for len(q.h) > 0 && q.h[0].due <= until {
		due := q.h[0].item.Due().Sub(epoch)
		if due <= q.h[0].due {
			return true
		}
		q.h[0].due = due
		q.h.down(0)
	}
	return false
}

// items is the heap of a Queue: entry i's children are 2i+1 and 2i+2.
type items[T Item] []entry[T]

func (h items[T]) less(i, j int) bool { return h[i].due < h[j].due }

func (h items[T]) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].item.slot().pos, h[j].item.slot().pos = i+1, j+1
}

func (h *items[T]) push(e entry[T]) {
	e.item.slot().pos = len(*h) + 1
	if len(*h) == cap(*h) {
		// Double. append grows a long slice by a quarter: filling a
		// queue of a million registrations copied it 38 times and
		// allocated 5.5 times its size, memory the kernel maps anew.
		*h = slices.Grow(*h, len(*h))
	}
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// remove takes out entry i and returns it.
func (h *items[T]) remove(i int) entry[T] {
	n := len(*h) - 1
	if i != n {
		h.swap(i, n)
	}
	e := (*h)[n]
	(*h)[n] = entry[T]{}
	*h = (*h)[:n]
	if i != n {
		h.fix(i)
	}
	e.item.slot().pos = 0
	return e
}

// fix restores the order after entry i's due time changed.
func (h items[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h items[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down moves entry i down and reports whether it moved.
func (h items[T]) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h) || child < 0 {
			break
		}
		if right := child + 1; right < len(h) && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}
