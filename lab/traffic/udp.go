package traffic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The datagram header of a Background flow, big-endian:
//
//	magic "ATRU" (4) | flags (1) | id len (1) | reserved (2) |
//	sequence number (8) | send time, Unix nanoseconds (8) | flow id
//
// then zero padding to the flow's datagram size. An end marker is the
// header and id alone, with the number of datagrams sent where the
// sequence number goes.
const (
	udpMagic     = "ATRU"
	udpHeaderLen = 24
	udpFlagLast  = 1 // the flow's last datagram
	udpFlagEnd   = 2 // an end marker, not data
)

// paceTick is how often a Background sender wakes to send what is due.
const paceTick = time.Millisecond

// After its last datagram a sender sends endMarkers end markers,
// endMarkerGap apart, so that a sink whose last datagrams were lost
// still learns how many were sent: sequence numbers alone cannot show
// losses at the end. Spread over 100 ms, they outlast a burst of drops
// at a full queue.
const (
	endMarkers   = 5
	endMarkerGap = 25 * time.Millisecond
)

// UDPSender is the sending end of a Background flow.
type UDPSender struct {
	flow Flow
	conn *net.UDPConn
}

// DialUDP opens a Background flow's socket towards addr (numeric
// "host:port" of a UDPSink) in the network namespace of the calling
// thread. Run it with Run, from any goroutine.
func DialUDP(f Flow, addr string) (*UDPSender, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Kind != Background {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: fmt.Errorf("a %s flow is not a background flow (see Dial)", f.Kind)}
	}
	if f.datagram() < udpHeaderLen+len(f.ID) {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: fmt.Errorf("datagram of %d bytes cannot carry the %d-byte header and id", f.datagram(), udpHeaderLen+len(f.ID))}
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: err}
	}
	var laddr *net.UDPAddr
	if f.Local.IsValid() {
		laddr = &net.UDPAddr{IP: f.Local.AsSlice()}
	}
	c, err := net.DialUDP("udp", laddr, raddr)
	if err != nil {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: err}
	}
	return &UDPSender{flow: f, conn: c}, nil
}

// Close closes the socket; Run closes it too.
func (s *UDPSender) Close() error { return s.conn.Close() }

// Run sends the flow at its rate for its duration, records the result
// into rec (nil: none) and returns it. Datagrams the network refuses
// (ICMP unreachable while the sink is not yet listening) do not stop the
// flow: background traffic goes on whatever happens to it.
func (s *UDPSender) Run(ctx context.Context, rec Recorder) (Result, error) {
	defer s.conn.Close()
	rec = orDiscard(rec)
	f := s.flow
	size := f.datagram()
	buf := make([]byte, size)
	copy(buf, udpMagic)
	buf[5] = byte(len(f.ID))
	copy(buf[udpHeaderLen:], f.ID)

	start := time.Now()
	res := Result{Flow: f, Role: Sender, Start: start}
	p := newPacer(start, f.Rate, size, f.Duration)
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	var err error
	for now := start; !p.done() && err == nil; {
		for n := p.due(now); n > 0 && err == nil; n-- {
			if p.sent+1 == p.total {
				buf[4] = udpFlagLast
			}
			binary.BigEndian.PutUint64(buf[8:], p.sent)
			binary.BigEndian.PutUint64(buf[16:], uint64(time.Now().UnixNano()))
			_, err = s.conn.Write(buf)
			if errors.Is(err, syscall.ECONNREFUSED) {
				err = nil
			}
			p.sent++
			if err == nil {
				res.Datagrams++
				res.Bytes += uint64(size)
			}
		}
		res.Completion = time.Since(start)
		if p.done() || err != nil {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case now = <-tick.C:
		}
	}
	if err != nil {
		res.Err = &FlowError{Flow: f.ID, Op: "send", Err: err}
	} else {
		s.sendEndMarkers(ctx, buf[:udpHeaderLen+len(f.ID)], p.sent)
	}
	rec.Record(res.Record())
	return res, res.Err
}

// sendEndMarkers tells the sink that sent datagrams were sent, reusing
// the header in hdr. Markers are best effort: their errors and losses
// only leave the sink counting from sequence numbers, as before.
func (s *UDPSender) sendEndMarkers(ctx context.Context, hdr []byte, sent uint64) {
	hdr[4] = udpFlagEnd
	binary.BigEndian.PutUint64(hdr[8:], sent)
	for i := range endMarkers {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(endMarkerGap):
			}
		}
		binary.BigEndian.PutUint64(hdr[16:], uint64(time.Now().UnixNano()))
		s.conn.Write(hdr)
	}
}

// UDPSink is the receiving end of Background flows: one socket for any
// number of flows, told apart by their ids.
type UDPSink struct {
	conn      *net.UDPConn
	interval  time.Duration
	malformed atomic.Uint64

	mu      sync.Mutex
	flows   map[string]*udpFlow
	ended   map[string]bool // flows with a result: later datagrams are ignored
	results []Result
}

// udpFlow is what a sink has counted of one flow.
type udpFlow struct {
	id        string
	start     time.Time // first datagram
	last      time.Time
	bytes     uint64
	datagrams uint64
	next      uint64 // highest sequence number seen plus one
	prevBytes uint64
	prevTime  time.Time
}

// ListenUDP opens a UDPSink on addr in the network namespace of the
// calling thread; it samples its flows every interval (0: DefaultInterval).
func ListenUDP(addr string, interval time.Duration) (*UDPSink, error) {
	laddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("traffic: listen on %s: %w", addr, err)
	}
	c, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, fmt.Errorf("traffic: listen on %s: %w", addr, err)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &UDPSink{conn: c, interval: interval, flows: map[string]*udpFlow{}, ended: map[string]bool{}}, nil
}

// Addr is the sink's address.
func (s *UDPSink) Addr() net.Addr { return s.conn.LocalAddr() }

// Close closes the socket; Serve returns.
func (s *UDPSink) Close() error { return s.conn.Close() }

// Malformed counts the datagrams dropped because they were not a
// Background flow's.
func (s *UDPSink) Malformed() uint64 { return s.malformed.Load() }

// Results returns the results of the flows that have ended (their last
// datagram or end marker came, or Serve returned), in the order they
// ended.
func (s *UDPSink) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Result(nil), s.results...)
}

// Serve receives until ctx ends or Close is called, records a receiver
// sample per flow every interval and a result per flow into rec (nil:
// none). A flow ends with its last datagram or, if that was lost, its
// sender's end marker; flows with neither end when Serve returns.
func (s *UDPSink) Serve(ctx context.Context, rec Recorder) error {
	rec = orDiscard(rec)
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	stopTicks := ticking(s.interval, func() { s.sample(rec) })
	defer func() {
		stopTicks()
		s.mu.Lock()
		for _, fl := range s.flows {
			s.end(fl, rec)
		}
		s.mu.Unlock()
	}()
	buf := make([]byte, 65536)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("traffic: receive: %w", err)
		}
		s.receive(time.Now(), buf[:n], rec)
	}
}

// receive counts one datagram, or ends its flow on an end marker.
func (s *UDPSink) receive(t time.Time, b []byte, rec Recorder) {
	if len(b) < udpHeaderLen || string(b[:4]) != udpMagic || len(b) < udpHeaderLen+int(b[5]) {
		s.malformed.Add(1)
		return
	}
	id := string(b[udpHeaderLen : udpHeaderLen+int(b[5])])
	seq := binary.BigEndian.Uint64(b[8:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended[id] {
		return // a late datagram, or a marker after the last datagram
	}
	fl := s.flows[id]
	if fl == nil {
		fl = &udpFlow{id: id, start: t, last: t, prevTime: t}
		s.flows[id] = fl
	}
	if b[4]&udpFlagEnd != 0 {
		// Every datagram before seq was sent: those not seen are lost,
		// including a flow whose datagrams were all lost.
		fl.next = max(fl.next, seq)
		s.end(fl, rec)
		return
	}
	fl.last = t
	fl.bytes += uint64(len(b))
	fl.datagrams++
	fl.next = max(fl.next, seq+1)
	if b[4]&udpFlagLast != 0 {
		s.end(fl, rec)
	}
}

// sample records every flow's goodput since its previous sample.
func (s *UDPSink) sample(rec Recorder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, fl := range s.flows {
		r := fl.record(now)
		r.Interval = now.Sub(fl.prevTime)
		r.Goodput = rate(fl.bytes-fl.prevBytes, r.Interval)
		fl.prevBytes, fl.prevTime = fl.bytes, now
		rec.Record(r)
	}
}

func (fl *udpFlow) record(now time.Time) Record {
	return Record{Time: now, Flow: fl.id, Kind: KindReceiver, Role: Receiver,
		BytesReceived: fl.bytes, Datagrams: fl.datagrams, Lost: fl.next - fl.datagrams}
}

// end turns a flow into a result; s.mu is held.
func (s *UDPSink) end(fl *udpFlow, rec Recorder) {
	delete(s.flows, fl.id)
	s.ended[fl.id] = true
	res := Result{Flow: Flow{ID: fl.id, Kind: Background}, Role: Receiver,
		Start: fl.start, Completion: fl.last.Sub(fl.start),
		Bytes: fl.bytes, Datagrams: fl.datagrams, Lost: fl.next - fl.datagrams}
	s.results = append(s.results, res)
	rec.Record(res.Record())
}
