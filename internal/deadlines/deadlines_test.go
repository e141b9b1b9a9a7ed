package deadlines

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type item struct {
	Slot
	due   time.Time
	id    int
	reads int // calls of Due
}

func (i *item) Due() time.Time { i.reads++; return i.due }

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

// An item moved later does not come out at its old time, nor keeps
// another from coming out first, though its move waits until the front.
func TestQueuePostponed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var q Queue[*item]
	all := make([]*item, 100)
	for i := range all {
		all[i] = &item{id: i, due: t0.Add(time.Duration(i) * time.Second)}
		q.Schedule(all[i])
	}
	for _, it := range all[:10] { // refreshed: due after all the others
		it.due = it.due.Add(200 * time.Second)
		q.Schedule(it)
	}
	// Asking what is due before anything is reads no item, nor moves the
	// ones put off: a map-server asks every tick.
	for _, it := range all {
		it.reads = 0
	}
	if it, ok := q.Due(t0.Add(-time.Second)); ok {
		t.Fatalf("item %d came out before its time", it.id)
	}
	for _, it := range all {
		if it.reads != 0 {
			t.Fatalf("Due before any item's time read item %d", it.id)
		}
	}
	if first, _ := q.First(); first != all[10] {
		t.Fatalf("First = item %d, want 10", first.id)
	}
	if it, ok := q.Due(t0.Add(5 * time.Second)); ok {
		t.Fatalf("item %d came out at its old time", it.id)
	}
	all[99].due = t0 // moved earlier: at once
	q.Schedule(all[99])
	var order []int
	for {
		it, ok := q.Due(t0.Add(time.Hour))
		if !ok {
			break
		}
		order = append(order, it.id)
	}
	want := append([]int{99}, 10)
	for i := 11; i < 99; i++ {
		want = append(want, i)
	}
	for i := range 10 {
		want = append(want, i)
	}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}
