package traffic

import (
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/amptcp/amptcp/mptcp"
)

// ticking calls sample every interval on its own goroutine until the
// returned stop is called; stop waits for the goroutine to end, so that
// the caller's final sample is the last one.
func ticking(interval time.Duration, sample func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// senderSampler reads the sending socket's state: MPTCP_FULL_INFO while
// the connection is MPTCP, TCP_INFO otherwise.
type senderSampler struct {
	conn     syscall.Conn
	flow     string
	rec      Recorder
	fallback bool // MPTCP_FULL_INFO refused: plain TCP or fallen back

	mu       sync.Mutex
	subflows int // the most seen at once
	err      error
}

func newSenderSampler(c net.Conn, flow string, rec Recorder) *senderSampler {
	s := &senderSampler{flow: flow, rec: rec, fallback: !isMPTCP(c)}
	if sc, ok := c.(syscall.Conn); ok {
		s.conn = sc
	}
	return s
}

// sample records the socket's state now; an error is kept (the first)
// and sampling goes on, since a closing socket may refuse one read.
func (s *senderSampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		s.err = errNotSampled
		return
	}
	if !s.fallback {
		fi, err := mptcp.ReadFullInfo(s.conn)
		if errors.Is(err, syscall.EOPNOTSUPP) {
			s.fallback = true
		} else if err != nil {
			s.keep(err)
			return
		} else {
			s.recordFull(time.Now(), fi)
			return
		}
	}
	ti, err := readTCPInfo(s.conn)
	if err != nil {
		s.keep(err)
		return
	}
	now := time.Now()
	s.subflows = max(s.subflows, 1)
	r := Record{Time: now, Flow: s.flow, Kind: KindSubflow, Role: Sender}
	fillTCP(&r, ti)
	s.rec.Record(r)
}

func (s *senderSampler) keep(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *senderSampler) recordFull(now time.Time, fi *mptcp.FullInfo) {
	// The kernel lists a subflow it is still creating with ID 0 and no
	// local address: not a path yet, and never again under that ID.
	subflows := slices.DeleteFunc(slices.Clone(fi.Subflows), func(sf mptcp.SubflowInfo) bool { return sf.ID == 0 })
	s.subflows = max(s.subflows, len(subflows))
	s.rec.Record(Record{
		Time: now, Flow: s.flow, Kind: KindConnection, Role: Sender,
		BytesSent:    fi.Info.BytesSent,
		BytesAcked:   fi.Info.BytesAcked,
		BytesRetrans: fi.Info.BytesRetrans,
		Retransmits:  fi.Info.Retransmits,
		Subflows:     uint8(len(subflows)),
	})
	for _, sf := range subflows {
		r := Record{Time: now, Flow: s.flow, Kind: KindSubflow, Role: Sender,
			Subflow: sf.ID, Local: sf.Local, Remote: sf.Remote}
		fillTCP(&r, sf.TCP)
		s.rec.Record(r)
	}
}

// fillTCP copies what a sample keeps of a struct tcp_info.
func fillTCP(r *Record, ti mptcp.TCPInfo) {
	r.BytesSent = ti.BytesSent
	r.BytesAcked = ti.BytesAcked
	r.BytesRetrans = ti.BytesRetrans
	r.Retransmits = ti.TotalRetrans
	r.RTOs = ti.TotalRTO
	r.RTT = ti.RTT
	r.RTTVar = ti.RTTVar
	r.MinRTT = ti.MinRTT
	r.Cwnd = ti.SndCwnd
	r.MSS = ti.SndMSS
	r.DeliveryRate = float64(ti.DeliveryRate) * 8
}

// result returns the most subflows seen and the first error.
func (s *senderSampler) result() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subflows, s.err
}

// receiveState is what the receiving loop has counted, read by its
// sampler.
type receiveState struct {
	flow string
	rec  Recorder

	mu        sync.Mutex
	bytes     uint64
	arr       *arrivals
	prevBytes uint64
	prevTime  time.Time
}

func newReceiveState(flow string, rec Recorder, start time.Time) *receiveState {
	return &receiveState{flow: flow, rec: rec, arr: newArrivals(DataUnit), prevTime: start}
}

// add counts n bytes that a read returned at t.
func (s *receiveState) add(t time.Time, n int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += uint64(n)
	s.arr.add(t, n)
	return s.bytes
}

// sample records the goodput and jitter since the previous sample.
func (s *receiveState) sample() {
	s.mu.Lock()
	now := time.Now()
	g := s.arr.takeInterval()
	r := Record{Time: now, Flow: s.flow, Kind: KindReceiver, Role: Receiver,
		BytesReceived: s.bytes,
		Interval:      now.Sub(s.prevTime),
		Units:         g.n,
		Jitter:        g.stddev(),
		MaxGap:        g.max,
	}
	r.Goodput = rate(s.bytes-s.prevBytes, r.Interval)
	s.prevBytes, s.prevTime = s.bytes, now
	s.mu.Unlock()
	s.rec.Record(r)
}

// total returns the bytes received and the whole flow's gap statistics.
func (s *receiveState) total() (uint64, gapStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.arr.total
}

// rate is bytes over d in bits per second (0 for an empty interval).
func rate(bytes uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds()
}
