package deadlines

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type item struct {
	Slot
	due time.Time
	id  int
}

func (i *item) Due() time.Time { return i.due }

// Items come out in due order, whatever was moved or removed meanwhile,
// and only once due.
func TestQueue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := rand.New(rand.NewPCG(1, 2))
	var q Queue[*item]
	all := make([]*item, 200)
	for i := range all {
		all[i] = &item{id: i, due: t0.Add(time.Duration(r.IntN(1000)) * time.Second)}
		q.Schedule(all[i])
	}
	for _, it := range all[:50] { // moved
		it.due = t0.Add(time.Duration(r.IntN(1000)) * time.Second)
		q.Schedule(it)
	}
	for _, it := range all[50:80] { // removed, one twice
		q.Remove(it)
	}
	q.Remove(all[50])
	if q.Len() != 170 {
		t.Fatalf("Len %d, want 170", q.Len())
	}
	if first, ok := q.First(); !ok || first.due.Before(t0) {
		t.Fatalf("First = %v, %v", first, ok)
	}
	if _, ok := q.Due(t0.Add(-time.Second)); ok {
		t.Fatal("an item came out before it was due")
	}
	var got []time.Time
	for {
		it, ok := q.Due(t0.Add(time.Hour))
		if !ok {
			break
		}
		if it.pos != 0 {
			t.Errorf("item %d out of the queue keeps position %d", it.id, it.pos)
		}
		got = append(got, it.due)
	}
	if len(got) != 170 || !slices.IsSortedFunc(got, time.Time.Compare) {
		t.Errorf("%d items out, sorted %v", len(got), slices.IsSortedFunc(got, time.Time.Compare))
	}
	q.Schedule(all[60]) // a removed item can come back
	if it, ok := q.First(); !ok || it != all[60] {
		t.Errorf("First after rescheduling = %v, %v", it, ok)
	}
}
