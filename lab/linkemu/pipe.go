package linkemu

import (
	"math"
	"time"
)

// frame is one Ethernet frame on its way through a pipe.
type frame struct {
	buf []byte // the frame; its capacity is the pool's buffer size
	at  int64  // when it was read, in ns of the loop's clock
	due int64  // when it leaves its current stage
}

// fifo is a queue of frames.
type fifo struct {
	items []*frame
	head  int
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) front() *frame { return q.items[q.head] }

func (q *fifo) push(f *frame) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, f)
}

func (q *fifo) pop() *frame {
	f := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return f
}

// never is the due time of a pipe with nothing to do.
const never = math.MaxInt64

// pipe is one direction of a link: loss, a byte-limited drop-tail queue,
// a serializer at the link rate and a delay line. It does no I/O and
// reads no clock: the loop passes the time in, so that the scheduling
// arithmetic is tested on its own.
//
// The serializer is exact however late the loop wakes: a frame starts
// when the one before it finished (or when it arrived, if the serializer
// was idle), not when the loop noticed, so a late wakeup delays writes
// but never the schedule.
type pipe struct {
	p     Params
	down  bool
	loss  lossState
	queue fifo // the head is being serialized; its due is when it ends
	bytes int  // in queue
	// finished is when the serializer finished its last frame.
	finished int64
	flight   fifo  // serialized, waiting out the delay; due is delivery
	lastDue  int64 // frames are never reordered, even if Delay shrinks
	stats    DirStats
}

func newPipe(p Params, seed uint64, d Direction) *pipe {
	return &pipe{p: p, loss: newLossState(seed, d)}
}

// txTime is how long the serializer takes for n bytes.
func (pp *pipe) txTime(n int) int64 {
	return int64(float64(n) * 8e9 / pp.p.Rate)
}

// offer takes a frame read at now. It reports false if the frame was
// dropped; the caller then still owns it.
func (pp *pipe) offer(f *frame, now int64) bool {
	n := len(f.buf)
	pp.stats.FramesIn++
	pp.stats.BytesIn += uint64(n)
	switch {
	case pp.down:
		pp.stats.DroppedDown++
		return false
	case pp.loss.lose(&pp.p.Loss):
		pp.stats.DroppedLoss++
		return false
	case pp.bytes+n > pp.p.QueueBytes:
		pp.stats.DroppedQueue++
		return false
	}
	f.at = now
	pp.queue.push(f)
	pp.bytes += n
	if pp.queue.len() == 1 {
		pp.start(f)
	}
	return true
}

// start puts f, the new head of the queue, on the serializer.
func (pp *pipe) start(f *frame) {
	f.due = max(f.at, pp.finished) + pp.txTime(len(f.buf))
}

// advance moves what is due at now through the serializer and the delay
// line, and hands each frame due for delivery to deliver, in order.
func (pp *pipe) advance(now int64, deliver func(*frame)) {
	for pp.queue.len() > 0 && pp.queue.front().due <= now {
		f := pp.queue.pop()
		pp.bytes -= len(f.buf)
		pp.finished = f.due
		f.due = max(f.due+int64(pp.p.Delay), pp.lastDue)
		pp.lastDue = f.due
		pp.flight.push(f)
		if pp.queue.len() > 0 {
			pp.start(pp.queue.front())
		}
	}
	for pp.flight.len() > 0 && pp.flight.front().due <= now {
		deliver(pp.flight.pop())
	}
}

// next is when advance has something to do, or never.
func (pp *pipe) next() int64 {
	t := int64(never)
	if pp.queue.len() > 0 {
		t = pp.queue.front().due
	}
	if pp.flight.len() > 0 {
		t = min(t, pp.flight.front().due)
	}
	return t
}

// delivered counts a frame written to the receiving TAP at now.
func (pp *pipe) delivered(f *frame, now int64) {
	pp.stats.Delivered++
	pp.stats.DeliveredBytes += uint64(len(f.buf))
	pp.stats.Lateness.add(time.Duration(now - f.due))
}

// setParams changes the parameters from now on: the frame being
// serialized keeps its end, the next one starts at the new rate; frames
// in flight keep their delivery times; a smaller queue drops nothing
// already queued.
func (pp *pipe) setParams(p Params) { pp.p = p }

// setDown takes the direction down at now, dropping what is queued or
// in flight (a cut link loses what is on it), or brings it up again. The
// dropped frames go to free.
func (pp *pipe) setDown(down bool, now int64, free func(*frame)) {
	pp.down = down
	if !down {
		return
	}
	for _, q := range []*fifo{&pp.queue, &pp.flight} {
		for q.len() > 0 {
			pp.stats.DroppedDown++
			free(q.pop())
		}
	}
	pp.bytes = 0
	// Nothing of what was dropped may hold back the next frame.
	pp.finished = min(pp.finished, now)
	pp.lastDue = 0
}
