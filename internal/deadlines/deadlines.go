// Package deadlines keeps items in the order they fall due, and takes out
// or moves any one of them in O(log n): what the map-server's
// registrations and the map-cache's entries expire by.
package deadlines

import (
	"container/heap"
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
// most once.
type Queue[T Item] struct{ h items[T] }

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return len(q.h) }

// Schedule queues x, or moves it to its new due time if it is queued.
func (q *Queue[T]) Schedule(x T) {
	if pos := x.slot().pos; pos > 0 {
		heap.Fix(&q.h, pos-1)
		return
	}
	heap.Push(&q.h, x)
}

// Remove takes x out of the queue, if it is in it.
func (q *Queue[T]) Remove(x T) {
	if pos := x.slot().pos; pos > 0 {
		heap.Remove(&q.h, pos-1)
	}
}

// First is the item that falls due first; ok is false when none is
// queued.
func (q *Queue[T]) First() (x T, ok bool) {
	if len(q.h) == 0 {
		return x, false
	}
	return q.h[0], true
}

// Due takes out and returns the first item if it is due at now.
func (q *Queue[T]) Due(now time.Time) (x T, ok bool) {
	if len(q.h) == 0 || q.h[0].Due().After(now) {
		return x, false
	}
	return heap.Pop(&q.h).(T), true
}

// items is the heap.Interface of a Queue.
type items[T Item] []T

func (h items[T]) Len() int           { return len(h) }
func (h items[T]) Less(i, j int) bool { return h[i].Due().Before(h[j].Due()) }
func (h items[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot().pos, h[j].slot().pos = i+1, j+1
}

func (h *items[T]) Push(x any) {
	it := x.(T)
	it.slot().pos = len(*h) + 1
	*h = append(*h, it)
}

func (h *items[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	it.slot().pos = 0
	*h = old[:len(old)-1]
	return it
}
