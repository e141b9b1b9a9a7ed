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
// then zero padding to the flow's datagram size.
const (
	udpMagic     = "ATRU"
	udpHeaderLen = 24
	udpFlagLast  = 1 // the flow's last datagram
)

// paceTick is how often a Background sender wakes to send what is due.
const paceTick = time.Millisecond

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
	c, err := net.DialUDP("udp", nil, raddr)
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
	}
	rec.Record(res.Record())
	return res, res.Err
}

// UDPSink is the receiving end of Background flows: one socket for any
// number of flows, told apart by their ids.
type UDPSink struct {
	conn      *net.UDPConn
	interval  time.Duration
	malformed atomic.Uint64

	mu      sync.Mutex
	flows   map[string]*udpFlow
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
	return &UDPSink{conn: c, interval: interval, flows: map[string]*udpFlow{}}, nil
}

// Addr is the sink's address.
func (s *UDPSink) Addr() net.Addr { return s.conn.LocalAddr() }

// Close closes the socket; Serve returns.
func (s *UDPSink) Close() error { return s.conn.Close() }

// Malformed counts the datagrams dropped because they were not a
// Background flow's.
func (s *UDPSink) Malformed() uint64 { return s.malformed.Load() }

// Results returns the results of the flows that have ended (their last
// datagram came, or Serve returned), in the order they ended.
func (s *UDPSink) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Result(nil), s.results...)
}

// Serve receives until ctx ends or Close is called, records a receiver
// sample per flow every interval and a result per flow into rec (nil:
// none). Flows whose last datagram was lost end when Serve returns.
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

// receive counts one datagram.
func (s *UDPSink) receive(t time.Time, b []byte, rec Recorder) {
	if len(b) < udpHeaderLen || string(b[:4]) != udpMagic || len(b) < udpHeaderLen+int(b[5]) {
		s.malformed.Add(1)
		return
	}
	id := string(b[udpHeaderLen : udpHeaderLen+int(b[5])])
	seq := binary.BigEndian.Uint64(b[8:])
	s.mu.Lock()
	defer s.mu.Unlock()
	fl := s.flows[id]
	if fl == nil {
		fl = &udpFlow{id: id, start: t, prevTime: t}
		s.flows[id] = fl
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
	res := Result{Flow: Flow{ID: fl.id, Kind: Background}, Role: Receiver,
		Start: fl.start, Completion: fl.last.Sub(fl.start),
		Bytes: fl.bytes, Datagrams: fl.datagrams, Lost: fl.next - fl.datagrams}
	s.results = append(s.results, res)
	rec.Record(res.Record())
}
