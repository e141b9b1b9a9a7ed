package linkemu

import (
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// newTestPipe is a pipe at 8 Mbit/s, so that a frame of n bytes takes n
// microseconds on the serializer.
func newTestPipe(delay time.Duration, queue int) *pipe {
	return newPipe(Params{Rate: 8e6, Delay: delay, QueueBytes: queue}, 1, AToB)
}

func frameOf(n int) *frame { return &frame{buf: make([]byte, n)} }

// run advances pp at each of the given times and returns when each
// delivered frame (identified by its length) was due.
func run(pp *pipe, times ...int64) map[int]int64 {
	got := map[int]int64{}
	for _, now := range times {
		pp.advance(now, func(f *frame) { got[len(f.buf)] = f.due })
	}
	return got
}

func TestPipeSerializesBackToBackThenDelays(t *testing.T) {
	pp := newTestPipe(10*time.Millisecond, 10000)
	// Three frames arrive together at t=1ms: each starts when the one
	// before it ends, then waits out the delay.
	for _, n := range []int{1000, 1001, 1002} {
		if !pp.offer(frameOf(n), 1*ms) {
			t.Fatalf("frame of %d bytes dropped", n)
		}
	}
	us := int64(time.Microsecond)
	if got, want := pp.next(), 1*ms+1000*us; got != want {
		t.Fatalf("next = %d, want the end of the first frame %d", got, want)
	}
	// A loop that wakes only once, late, still computes each frame's
	// time from the schedule, not from the wakeup.
	got := run(pp, 50*ms)
	want := map[int]int64{
		1000: 1*ms + 1000*us + 10*ms,
		1001: 1*ms + 2001*us + 10*ms,
		1002: 1*ms + 3003*us + 10*ms,
	}
	for n, due := range want {
		if got[n] != due {
			t.Errorf("frame of %d bytes due at %d, want %d", n, got[n], due)
		}
	}
	if pp.next() != never {
		t.Errorf("next = %d after everything left, want never", pp.next())
	}
}

func TestPipeIdleSerializerStartsAtArrival(t *testing.T) {
	pp := newTestPipe(0, 10000)
	pp.offer(frameOf(500), 0)
	run(pp, 1*ms) // done at 0.5 ms
	pp.offer(frameOf(600), 2*ms)
	if got, want := pp.next(), 2*ms+600*int64(time.Microsecond); got != want {
		t.Fatalf("second frame ends at %d, want %d (its arrival plus 600 us)", got, want)
	}
	// With no delay the frame leaves as it is serialized.
	if got := run(pp, 3*ms); got[600] != 2*ms+600*int64(time.Microsecond) {
		t.Fatalf("second frame due at %d", got[600])
	}
}

func TestPipeDropTailCountsBytes(t *testing.T) {
	pp := newTestPipe(0, 2500)
	var accepted []int
	for _, n := range []int{1000, 1000, 1000, 400} {
		if pp.offer(frameOf(n), 0) {
			accepted = append(accepted, n)
		}
	}
	// 1000+1000 fit, the third 1000 does not (3000 > 2500), 400 does.
	if len(accepted) != 3 || accepted[2] != 400 {
		t.Fatalf("accepted %v, want [1000 1000 400]", accepted)
	}
	if pp.stats.DroppedQueue != 1 || pp.stats.FramesIn != 4 || pp.stats.BytesIn != 3400 {
		t.Fatalf("stats %+v", pp.stats)
	}
	// Once the first frame has left, there is room again.
	run(pp, 1*ms)
	if !pp.offer(frameOf(1000), 1*ms) {
		t.Fatal("queue still full after the head left")
	}
}

func TestPipeRateChangeAppliesToTheNextFrame(t *testing.T) {
	pp := newTestPipe(0, 10000)
	pp.offer(frameOf(1000), 0)
	pp.offer(frameOf(1001), 0)
	p := pp.p
	p.Rate = 16e6 // twice as fast
	pp.setParams(p)
	got := run(pp, 10*ms)
	us := int64(time.Microsecond)
	if got[1000] != 1000*us {
		t.Errorf("frame on the serializer due at %d, want 1000 us (the old rate)", got[1000])
	}
	if got[1001] != 1000*us+500500 {
		t.Errorf("next frame due at %d, want 1500.5 us (half the time at the new rate)", got[1001])
	}
}

func TestPipeKeepsOrderWhenDelayShrinks(t *testing.T) {
	pp := newTestPipe(20*time.Millisecond, 10000)
	pp.offer(frameOf(100), 0)
	run(pp, 1*ms) // serialized, in flight until 20.1 ms
	p := pp.p
	p.Delay = 0
	pp.setParams(p)
	pp.offer(frameOf(200), 1*ms)
	var order []int
	for now := int64(0); now < 30*ms; now += ms / 10 {
		pp.advance(now, func(f *frame) { order = append(order, len(f.buf)) })
	}
	if len(order) != 2 || order[0] != 100 {
		t.Fatalf("delivered %v, want [100 200]: a link does not reorder", order)
	}
}

func TestPipeDownDropsEverything(t *testing.T) {
	pp := newTestPipe(10*time.Millisecond, 10000)
	pp.offer(frameOf(1000), 0)
	pp.offer(frameOf(1000), 0)
	run(pp, 1500*int64(time.Microsecond)) // one in flight, one queued
	freed := 0
	pp.setDown(true, 2*ms, func(*frame) { freed++ })
	if pp.offer(frameOf(300), 2*ms) {
		t.Fatal("a down pipe accepted a frame")
	}
	if freed != 2 || pp.stats.DroppedDown != 3 || pp.next() != never {
		t.Fatalf("freed %d, stats %+v, next %d; want 2 freed, 3 dropped while down, nothing left", freed, pp.stats, pp.next())
	}
	pp.setDown(false, 3*ms, nil)
	pp.offer(frameOf(1000), 3*ms)
	if got, want := pp.next(), 4*ms; got != want {
		t.Fatalf("after up, next = %d, want %d: dropped frames must not hold the serializer", got, want)
	}
	if got := run(pp, 20*ms); got[1000] != 14*ms {
		t.Fatalf("after up, frame due at %d, want 14 ms", got[1000])
	}
}

func TestPipeDeliveredRecordsLateness(t *testing.T) {
	pp := newTestPipe(0, 10000)
	pp.offer(frameOf(1000), 0)
	pp.advance(2*ms, func(f *frame) { pp.delivered(f, 2*ms) })
	h := pp.stats.Lateness
	if pp.stats.Delivered != 1 || pp.stats.DeliveredBytes != 1000 || h.Max != time.Millisecond {
		t.Fatalf("stats %+v, want one frame of 1000 bytes 1 ms late", pp.stats)
	}
}

func TestFifoReusesItsSlice(t *testing.T) {
	var q fifo
	for i := range 5000 {
		q.push(frameOf(i))
		if i%2 == 1 {
			q.pop()
		}
	}
	for i := 2500; i < 5000; i++ {
		if n := len(q.pop().buf); n != i {
			t.Fatalf("popped %d, want %d", n, i)
		}
	}
	if q.len() != 0 {
		t.Fatalf("len %d after popping everything", q.len())
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	for range 98 {
		h.add(3 * time.Microsecond)
	}
	h.add(400 * time.Microsecond)
	h.add(7 * time.Millisecond)
	if got := h.Quantile(0.5); got != 5*time.Microsecond {
		t.Errorf("p50 = %v, want the 5us bucket", got)
	}
	if got := h.Quantile(0.99); got != 500*time.Microsecond {
		t.Errorf("p99 = %v, want the 500us bucket", got)
	}
	if got := h.Quantile(1); got != 7*time.Millisecond {
		t.Errorf("p100 = %v, want the max, 7ms", got)
	}
	var sum Histogram
	sum.Merge(h)
	sum.Merge(h)
	if sum.Count != 200 || sum.Max != 7*time.Millisecond || sum.Quantile(0.99) != h.Quantile(0.99) {
		t.Errorf("merged %+v", sum)
	}
}
