package maprequest

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// maxBatch is how many datagrams one system call sends or receives,
	// as lispd's own loop does.
	maxBatch = 64
	// lostAfter is when a request without a reply counts as lost and
	// frees its place in the window (a Map-Register is then sent again).
	// Loopback answers in microseconds and Go's garbage collector stops
	// the world for less than a millisecond; later than this, the
	// datagram was dropped. A longer wait would stall the window.
	lostAfter = 250 * time.Millisecond
)

// warmup is how long each server runs, unmeasured, before its first
// measurement: long enough for lispd's caches and the kernel's socket
// buffers to settle.
func warmup(d time.Duration) time.Duration { return min(max(d/5, 100*time.Millisecond), time.Second) }

// load sends Encapsulated Map-Requests to a server and matches the
// replies by nonce, on one thread that allocates nothing per request.
// The nonce is phase<<48 | seq: seq is the send order, so the send time
// of a reply is in slot seq%ringSize, and a reply to an earlier phase is
// never taken for one of this phase.
type load struct {
	conn   *udpConn
	reqs   *requests
	server int // PID of the server, for its CPU time

	phase     uint64
	sent      []int64 // send time by slot; 0: no request there
	next, old uint64  // next seq to send; oldest that may be in flight
	inflight  int
	start     time.Time
	wallStart int64 // start in Unix nanoseconds, for the kernel's receive timestamps
	sendB     *batch
	recvB     *batch

	// Results of the phase.
	replies, lost, negative, unmatched uint64
	replySize                          int
	record                             int64           // record latencies of requests sent from then on
	latencies                          []time.Duration // of the open loops since the caller emptied it
}

func newLoad(conn *udpConn, reqs *requests, server int) *load {
	return &load{
		conn: conn, reqs: reqs, server: server,
		sent:  make([]int64, ringSize),
		sendB: newBatch(maxBatch, reqs.size),
		recvB: newBatch(maxBatch, 2048),
	}
}

// begin starts a new phase: a new nonce prefix and empty counters.
func (g *load) begin() {
	g.phase++ // the ring is clear: the last phase's drain expired what was left
	g.next, g.old, g.inflight = 1, 1, 0
	g.replies, g.lost, g.negative, g.unmatched = 0, 0, 0, 0
	g.record = 1 << 62                          // none, unless openLoop says so
	g.start = time.Now().Add(-time.Microsecond) // now() > 0, the empty slot
	g.wallStart = g.start.UnixNano()
}

// len is the number of requests.
func (r *requests) len() int { return len(r.buf) / r.size }

// now is the time since the phase began, in nanoseconds.
func (g *load) now() int64 { return int64(time.Since(g.start)) }

// send sends k requests (at most maxBatch) and returns how many the
// kernel took. Their send time is read last, just before the system call.
func (g *load) send(k int) (int, error) {
	for i := range k {
		seq := g.next + uint64(i)
		b := g.sendB.bufs[i][:g.reqs.size]
		copy(b, g.reqs.msg(int(seq%uint64(g.reqs.len()))))
		putNonce(b, g.phase<<48|seq)
		g.sendB.point(i, b)
	}
	now := g.now()
	n, err := g.conn.send(g.sendB, k)
	for i := range n {
		slot := &g.sent[(g.next+uint64(i))%ringSize]
		if *slot != 0 { // still unanswered a whole ring ago
			g.lost++
			g.inflight--
		}
		*slot = now
	}
	g.next += uint64(n)
	g.inflight += n
	return n, err
}

// receive takes the replies that have arrived, without waiting.
func (g *load) receive() (int, error) {
	n, err := g.conn.recv(g.recvB)
	if n == 0 {
		return 0, err
	}
	now := g.now()
	for i := range n {
		b := g.recvB.received(i)
		nonce, negative, ok := readReply(b)
		seq := nonce & (1<<48 - 1)
		if !ok || nonce>>48 != g.phase || seq >= g.next || g.next-seq > ringSize {
			g.unmatched++
			continue
		}
		slot := &g.sent[seq%ringSize]
		if *slot == 0 {
			g.unmatched++ // a duplicate, or a reply after its request was given up
			continue
		}
		if *slot >= g.record {
			at := now
			if wall, ok := g.recvB.arrival(i); ok {
				at = wall - g.wallStart
			}
			g.latencies = append(g.latencies, time.Duration(max(at-*slot, 0)))
		}
		*slot = 0
		g.inflight--
		g.replies++
		g.replySize = len(b)
		if negative {
			g.negative++
		}
	}
	return n, err
}

// expire gives up the requests sent before now-lostAfter.
func (g *load) expire(now int64) {
	for g.old < g.next {
		slot := &g.sent[g.old%ringSize]
		if *slot != 0 {
			if now-*slot < int64(lostAfter) {
				return
			}
			*slot = 0
			g.lost++
			g.inflight--
		}
		g.old++
	}
}

// drain waits for the replies still due, so that the server is idle when
// the next phase starts, and counts the rest as lost.
func (g *load) drain(ctx context.Context) error {
	deadline := g.now() + int64(lostAfter)
	for g.inflight > 0 && g.now() < deadline && ctx.Err() == nil {
		n, err := g.receive()
		if err != nil {
			return err
		}
		if n == 0 {
			if err := g.conn.wait(time.Millisecond); err != nil {
				return err
			}
		}
	}
	g.expire(1 << 62)
	return ctx.Err()
}

// phaseStats is what one or more phases measured (lispd's turns add up).
type phaseStats struct {
	elapsed   time.Duration
	replies   uint64 // received before the phase ended
	sent      uint64
	lost      uint64 // no reply within lostAfter, the drain included
	negative  uint64
	unmatched uint64
	replySize int
	server    time.Duration // CPU time of the server
	waited    time.Duration // the server's threads' time waiting for a CPU while runnable
	generator time.Duration // CPU time of the generator's thread
	idle      time.Duration // closed loop: the generator's time with nothing to send nor receive
	drops     uint64        // UDP receive-buffer drops on the host
	lag       time.Duration // open loop: how far sending fell behind its schedule, at most
	skipped   uint64        // open loop: requests not sent, that far behind
}

func (st *phaseStats) seconds() float64 { return st.elapsed.Seconds() }

// add adds what o measured to st.
func (st *phaseStats) add(o *phaseStats) {
	st.elapsed += o.elapsed
	st.replies += o.replies
	st.sent += o.sent
	st.lost += o.lost
	st.negative += o.negative
	st.unmatched += o.unmatched
	st.replySize = max(st.replySize, o.replySize)
	st.server += o.server
	st.waited += o.waited
	st.generator += o.generator
	st.idle += o.idle
	st.drops += o.drops
	st.lag = max(st.lag, o.lag)
	st.skipped += o.skipped
}

// perSecond is the rate of replies.
func (st *phaseStats) perSecond() float64 { return float64(st.replies) / st.seconds() }

// meter holds the counters at the start of a phase.
type meter struct {
	t0                     int64
	replies, sent          uint64
	server, waited, thread time.Duration
	drops                  uint64
}

func (g *load) startMeter(now int64) meter {
	return meter{t0: now, replies: g.replies, sent: g.next, server: cpuTime(g.server), waited: runDelay(g.server),
		thread: threadCPU(), drops: udpDrops()}
}

// stopMeter adds what was measured since m started to st.
func (g *load) stopMeter(m meter, now int64, st *phaseStats) {
	st.elapsed += time.Duration(now - m.t0)
	st.replies += g.replies - m.replies
	st.sent += g.next - m.sent
	st.server += cpuTime(g.server) - m.server
	st.waited += runDelay(g.server) - m.waited
	st.generator += threadCPU() - m.thread
	st.drops += udpDrops() - m.drops
}

// end drains the phase and adds its losses and oddities to st.
func (g *load) end(ctx context.Context, st *phaseStats) error {
	err := g.drain(ctx)
	st.lost += g.lost
	st.negative += g.negative
	st.unmatched += g.unmatched
	st.replySize = max(st.replySize, g.replySize)
	return err
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// closedLoop keeps window requests in flight, sending one as each reply
// arrives, for duration, and adds what it measured to st: the most the
// server answers. Between replies it polls rather than sleeps: the server
// then never has to wake the generator, which costs a cross-CPU
// interrupt, a dear one in a virtual machine.
func (g *load) closedLoop(ctx context.Context, window int, duration time.Duration, st *phaseStats) error {
	g.begin()
	m := g.startMeter(g.now())
	var last int64 // when the previous iteration began
	worked := true // whether it sent or received anything
	for iter := 0; ; iter++ {
		now := g.now()
		if !worked {
			st.idle += time.Duration(now - last)
		}
		last, worked = now, false
		if now >= int64(duration) {
			g.stopMeter(m, now, st)
			return g.end(ctx, st)
		}
		if iter%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		g.expire(now)
		for g.inflight < window {
			k := min(maxBatch, window-g.inflight)
			n, err := g.send(k)
			if err != nil {
				return err
			}
			worked = worked || n > 0
			if n < k {
				break
			}
		}
		n, err := g.receive()
		if err != nil {
			return err
		}
		worked = worked || n > 0
	}
}

// openLoop sends requests at rate per second on a schedule, whatever the
// replies do, for duration, appends the latency of each to g.latencies
// and adds the rest of what it measured to st. It sends small batches
// (about every 20 µs) and spins between them on the clock: Go timers
// overshoot by about a millisecond here, more than the latencies
// measured. When it falls more than a millisecond behind (its thread was
// descheduled), it skips the requests it missed rather than send them in
// a burst that measures the generator, and counts them.
func (g *load) openLoop(ctx context.Context, rate float64, duration time.Duration, st *phaseStats) error {
	g.begin()
	burst := int64(min(max(rate*20e-6, 1), maxBatch))
	limit := max(int64(rate*1e-3), burst)
	if need := len(g.latencies) + int(rate*duration.Seconds()*1.1) + 1024; cap(g.latencies) < need {
		g.latencies = append(make([]time.Duration, 0, need), g.latencies...) // no growing in the loop
	}
	g.record = 0
	m := g.startMeter(g.now())
	var scheduled int64 // requests sent so far, as the schedule counts them
	var behind int64    // most requests due at once
	for iter := 0; ; iter++ {
		now := g.now()
		if now >= int64(duration) {
			g.stopMeter(m, now, st)
			st.lag = max(st.lag, time.Duration(float64(behind)/rate*1e9))
			return g.end(ctx, st)
		}
		if iter%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		due := int64(float64(now)*rate/1e9) - scheduled
		behind = max(behind, due)
		if due > limit {
			scheduled += due - burst
			st.skipped += uint64(due - burst)
			due = burst
		}
		if due >= burst {
			n, err := g.send(int(min(due, maxBatch)))
			if err != nil {
				return err
			}
			scheduled += int64(n)
		}
		g.expire(now)
		if _, err := g.receive(); err != nil {
			return err
		}
	}
}
