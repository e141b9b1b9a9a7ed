package maprequest

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// stallAfter is how long register waits for a Map-Notify, any, before it
// gives up. Tests shorten it.
var stallAfter = 5 * time.Second

// registerStats is what one or more register calls measured.
type registerStats struct {
	elapsed    time.Duration // first send to last Map-Notify, summed
	acked      int
	resent     int
	server     time.Duration // CPU time of the server
	waited     time.Duration // the server's threads' time waiting for a CPU while runnable
	notifySize int
}

// add adds what o measured to st.
func (st *registerStats) add(o *registerStats) {
	st.elapsed += o.elapsed
	st.acked += o.acked
	st.resent += o.resent
	st.server += o.server
	st.waited += o.waited
	st.notifySize = max(st.notifySize, o.notifySize)
}

// register sends Map-Registers lo to hi-1, keeping window of them
// unacknowledged at most, until each has its Map-Notify, and adds what it
// measured to st. It sends again those without a Map-Notify after
// lostAfter (for lispd, a refresh), and gives up when none came for
// stallAfter (lispd refuses them, or is stuck). Like the Map-Request
// loops, it polls rather than sleeps and allocates nothing per message.
func register(ctx context.Context, c *udpConn, regs *registers, lo, hi, server, window int, st *registerStats) error {
	n := hi - lo
	var (
		sent     = make([]int64, n) // last send time of lo+i; 0: never sent
		done     = make([]bool, n)
		queue    []int32 // offsets from lo in the order sent, to find the overdue
		head     int
		retry    []int32
		next     int
		inflight int
		acked    int
		lastAck  int64
		idx      [maxBatch]int32
	)
	sendB := newBatch(maxBatch, 0)
	recvB := newBatch(maxBatch, 2048)
	start := time.Now().Add(-time.Microsecond)
	cpu0, wait0 := cpuTime(server), runDelay(server)
	defer func() {
		st.elapsed += time.Since(start)
		st.server += cpuTime(server) - cpu0
		st.waited += runDelay(server) - wait0
		st.acked += acked
	}()
	for iter := 0; acked < n; iter++ {
		now := int64(time.Since(start))
		if iter%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if now-lastAck > int64(stallAfter) {
			return fmt.Errorf("no Map-Notify for %s, %d of %d acknowledged", stallAfter, acked, n)
		}
		for head < len(queue) {
			i := queue[head]
			if !done[i] && now-sent[i] < int64(lostAfter) {
				break
			}
			if !done[i] {
				retry = append(retry, i)
			}
			head++
		}
		if head > 1<<16 && head > len(queue)/2 {
			queue = append(queue[:0], queue[head:]...)
			head = 0
		}
		k := 0
		for k < maxBatch && (len(retry) > 0 || (next < n && inflight < window)) {
			var i int32
			if len(retry) > 0 {
				i, retry = retry[len(retry)-1], retry[:len(retry)-1]
			} else {
				i = int32(next)
				next++
				inflight++
			}
			sendB.point(k, regs.msg(lo+int(i)))
			idx[k] = i
			k++
		}
		m, err := c.send(sendB, k)
		if err != nil {
			return err
		}
		for _, i := range idx[:m] {
			if sent[i] != 0 {
				st.resent++
			}
			sent[i] = now
			queue = append(queue, i)
		}
		retry = append(retry, idx[m:k]...) // the socket buffer was full: next time
		r, err := c.recv(recvB)
		if err != nil {
			return err
		}
		for j := range r {
			b := recvB.received(j)
			if len(b) < 12 || lisp.MsgType(b[0]>>4) != lisp.TypeMapNotify {
				continue
			}
			i := binary.BigEndian.Uint64(b[4:]) - 1 - uint64(lo) // the nonce is lo+i+1
			if i < uint64(n) && !done[i] {
				done[i] = true
				acked++
				inflight--
				lastAck = now
				st.notifySize = len(b)
			}
		}
	}
	return nil
}
