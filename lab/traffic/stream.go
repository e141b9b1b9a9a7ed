package traffic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Result is how one end of a flow ended.
type Result struct {
	Flow Flow
	Role Role
	// Protocol is what the connection really used: TCP for an MPTCP flow
	// whose connection fell back.
	Protocol Protocol
	// CongestionControl is read back from the socket, not taken from the
	// flow.
	CongestionControl string
	// Start is when the client began to dial (client) or the server
	// accepted the connection (server).
	Start time.Time
	// Completion runs from Start to the last byte received (receiver) or
	// to the receiver's acknowledgement of all bytes (sender). At the
	// client it thus includes the connection's handshake, as a user's
	// download time does.
	Completion time.Duration
	// Bytes is the payload this end sent or received.
	Bytes uint64
	// Subflows is the most subflows the sender's samples saw at once.
	Subflows int
	// Jitter and MaxGap are the receiver's, over the whole flow.
	Jitter, MaxGap time.Duration
	// Datagrams and Lost are a Background flow's, at the receiver.
	Datagrams, Lost uint64
	// Err is why the flow failed, or nil.
	Err error
}

// Record is r as a KindResult record, timed at its end.
func (r Result) Record() Record {
	rec := Record{
		Time: r.Start.Add(r.Completion), Flow: r.Flow.ID, Kind: KindResult, Role: r.Role,
		Protocol: r.Protocol, CongestionControl: r.CongestionControl, FlowKind: r.Flow.Kind,
		Start: r.Start, Completion: r.Completion,
		Jitter: r.Jitter, MaxGap: r.MaxGap, Datagrams: r.Datagrams, Lost: r.Lost,
		Subflows: uint8(min(r.Subflows, 255)),
	}
	if r.Role == Sender {
		rec.BytesSent = r.Bytes
	} else {
		rec.BytesReceived = r.Bytes
	}
	if r.Err != nil {
		rec.Error = r.Err.Error()
	}
	return rec
}

// FlowError says which flow failed, and at which step.
type FlowError struct {
	Flow string
	Op   string
	Err  error
}

func (e *FlowError) Error() string {
	return fmt.Sprintf("traffic: flow %q: %s: %v", e.Flow, e.Op, e.Err)
}
func (e *FlowError) Unwrap() error { return e.Err }

// ErrShortFlow: the peer ended the flow before all its bytes arrived, or
// acknowledged fewer than were sent.
var ErrShortFlow = errors.New("flow ended early")

// Stream is the client end of a Transfer or Saturate flow.
type Stream struct {
	flow  Flow
	conn  *net.TCPConn
	start time.Time
}

// Dial connects to a Server at addr (numeric "host:port") for f, from
// the network namespace of the calling thread, with f's protocol and
// congestion control set on the socket before it connects. Run the flow
// with Run, from any goroutine.
func Dial(ctx context.Context, f Flow, addr string) (*Stream, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Kind != Transfer && f.Kind != Saturate {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: fmt.Errorf("a %s flow is not a stream (see DialUDP)", f.Kind)}
	}
	d := &net.Dialer{Control: controlWith(f.CongestionControl)}
	if f.Local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: f.Local.AsSlice()}
	}
	d.SetMultipathTCP(f.Protocol == MPTCP)
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &FlowError{Flow: f.ID, Op: "dial", Err: err}
	}
	return &Stream{flow: f, conn: c.(*net.TCPConn), start: start}, nil
}

// Conn is the flow's connection, for inspection (ss, getsockopt).
func (s *Stream) Conn() *net.TCPConn { return s.conn }

// Close closes the connection; Run closes it too.
func (s *Stream) Close() error { return s.conn.Close() }

// Run sends the header, carries the flow to its end as sender (Upload)
// or receiver (Download), records samples and the result into rec (nil:
// none) and returns the result. Cancelling ctx ends the flow with an
// error.
func (s *Stream) Run(ctx context.Context, rec Recorder) (Result, error) {
	defer s.conn.Close()
	rec = orDiscard(rec)
	stop := context.AfterFunc(ctx, func() { s.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var res Result
	if _, err := s.conn.Write(appendHeader(nil, s.flow)); err != nil {
		res = s.failed(&FlowError{Flow: s.flow.ID, Op: "send header", Err: err})
	} else if s.flow.Direction == Upload {
		res = runSender(s.conn, s.flow, s.start, rec)
	} else {
		res = runReceiver(s.conn, s.flow, s.start, rec)
	}
	res = ctxResult(ctx, res)
	rec.Record(res.Record())
	return res, res.Err
}

func (s *Stream) failed(err error) Result {
	role := Sender
	if s.flow.Direction == Download {
		role = Receiver
	}
	return Result{Flow: s.flow, Role: role, Protocol: s.flow.Protocol, Start: s.start,
		Completion: time.Since(s.start), Err: err}
}

// ctxResult names the context's error as the cause when it ended a flow.
func ctxResult(ctx context.Context, r Result) Result {
	if r.Err != nil && ctx.Err() != nil && errors.Is(r.Err, os.ErrDeadlineExceeded) {
		r.Err = &FlowError{Flow: r.Flow.ID, Op: "run", Err: ctx.Err()}
	}
	return r
}

// sendChunk is the size of the sender's writes.
const sendChunk = 128 << 10

// runSender sends the flow's payload, half-closes, and waits for the
// receiver's count of bytes (the application's acknowledgement), sampling
// the socket all along.
func runSender(c *net.TCPConn, f Flow, start time.Time, rec Recorder) Result {
	res := Result{Flow: f, Role: Sender, Protocol: protocolOf(c), Start: start}
	res.CongestionControl, res.Err = congestionControl(c)
	smp := newSenderSampler(c, f.ID, rec)
	stop := ticking(f.interval(), smp.sample)
	fail := func(op string, err error) Result {
		stop()
		smp.sample()
		res.Completion = time.Since(start)
		res.Subflows, _ = smp.result()
		res.Err = &FlowError{Flow: f.ID, Op: op, Err: err}
		return res
	}
	if res.Err != nil {
		return fail("read congestion control", res.Err)
	}
	buf := make([]byte, sendChunk)
	var err error
	switch f.Kind {
	case Transfer:
		for left := f.Bytes; left > 0 && err == nil; {
			var n int
			n, err = c.Write(buf[:min(left, int64(len(buf)))])
			left -= int64(n)
			res.Bytes += uint64(n)
		}
	case Saturate:
		// The write deadline ends the last write on time even when the
		// socket buffer holds seconds of data on a slow path.
		end := time.Now().Add(f.Duration)
		c.SetWriteDeadline(end)
		for err == nil {
			var n int
			n, err = c.Write(buf)
			res.Bytes += uint64(n)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(end) {
			err = c.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil {
		return fail("send", err)
	}
	if err := c.CloseWrite(); err != nil {
		return fail("close write", err)
	}
	var ack [8]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return fail("read acknowledgement", shortRead(err))
	}
	res.Completion = time.Since(start)
	stop()
	smp.sample()
	res.Subflows, res.Err = smp.result()
	if got := binary.BigEndian.Uint64(ack[:]); got != res.Bytes {
		res.Err = &FlowError{Flow: f.ID, Op: "acknowledgement", Err: fmt.Errorf("%w: receiver got %d of %d bytes", ErrShortFlow, got, res.Bytes)}
	} else if res.Err != nil {
		res.Err = &FlowError{Flow: f.ID, Op: "sample", Err: res.Err}
	}
	return res
}

// runReceiver reads the payload (all of a Transfer's bytes, or until the
// sender half-closes), acknowledges it with the byte count, and waits for
// the sender to close, sampling goodput and jitter all along.
func runReceiver(c *net.TCPConn, f Flow, start time.Time, rec Recorder) Result {
	res := Result{Flow: f, Role: Receiver, Protocol: protocolOf(c), Start: start}
	res.CongestionControl, res.Err = congestionControl(c)
	st := newReceiveState(f.ID, rec, start)
	stop := ticking(f.interval(), st.sample)
	finish := func(op string, err error) Result {
		stop()
		st.sample()
		var g gapStats
		res.Bytes, g = st.total()
		res.Jitter, res.MaxGap = g.stddev(), g.max
		if err != nil {
			res.Err = &FlowError{Flow: f.ID, Op: op, Err: err}
		}
		return res
	}
	if res.Err != nil {
		return finish("read congestion control", res.Err)
	}
	buf := make([]byte, DataUnit)
	for {
		n, err := c.Read(buf)
		t := time.Now()
		total := st.add(t, n)
		if n > 0 {
			res.Completion = t.Sub(start)
		}
		if f.Kind == Transfer && total >= uint64(f.Bytes) {
			if total > uint64(f.Bytes) {
				return finish("receive", fmt.Errorf("%d bytes beyond the transfer's %d", total-uint64(f.Bytes), f.Bytes))
			}
			break
		}
		if errors.Is(err, io.EOF) {
			if f.Kind == Transfer {
				return finish("receive", fmt.Errorf("%w: got %d of %d bytes", ErrShortFlow, total, f.Bytes))
			}
			break
		}
		if err != nil {
			return finish("receive", err)
		}
	}
	var ack [8]byte
	binary.BigEndian.PutUint64(ack[:], st.bytesNow())
	if _, err := c.Write(ack[:]); err != nil {
		return finish("acknowledge", err)
	}
	if err := c.CloseWrite(); err != nil {
		return finish("close write", err)
	}
	res = finish("", nil)
	// The sender closes once it has the acknowledgement; anything else
	// it sends is a protocol error. The flow is complete already, so an
	// error of this wait (the server shutting down) is not the flow's.
	if n, _ := io.Copy(io.Discard, c); n > 0 {
		res.Err = &FlowError{Flow: f.ID, Op: "wait for close", Err: fmt.Errorf("%d bytes after the payload", n)}
	}
	return res
}

func (s *receiveState) bytesNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func protocolOf(c net.Conn) Protocol {
	if isMPTCP(c) {
		return MPTCP
	}
	return TCP
}

// ListenOptions configure a Server.
type ListenOptions struct {
	// Protocol is MPTCP (which also accepts plain TCP clients) or TCP.
	Protocol Protocol
	// CongestionControl, if set, is set on the listening socket. Each
	// accepted connection gets its flow's congestion control from the
	// client's header in any case, before any payload.
	CongestionControl string
	// HeaderTimeout bounds the wait for a client's header; 0 means 5 s.
	HeaderTimeout time.Duration
}

// Server is the server end of stream flows: it accepts connections and
// plays the sender or the receiver of each, as its header says.
type Server struct {
	ln   *net.TCPListener
	opts ListenOptions

	mu      sync.Mutex
	results []Result
}

// Listen opens a Server on addr ("10.0.1.2:5201", "[::]:0") in the network
// namespace of the calling thread.
func Listen(addr string, opts ListenOptions) (*Server, error) {
	if opts.Protocol != MPTCP && opts.Protocol != TCP {
		return nil, fmt.Errorf("traffic: listen on %s: protocol: need mptcp or tcp", addr)
	}
	lc := &net.ListenConfig{}
	if opts.CongestionControl != "" {
		lc.Control = controlWith(opts.CongestionControl)
	}
	lc.SetMultipathTCP(opts.Protocol == MPTCP)
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("traffic: listen on %s: %w", addr, err)
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 5 * time.Second
	}
	return &Server{ln: ln.(*net.TCPListener), opts: opts}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting; Serve returns once its flows have ended.
func (s *Server) Close() error { return s.ln.Close() }

// Results returns the results of the flows that have ended, in the
// order they ended.
func (s *Server) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Result(nil), s.results...)
}

// Serve accepts connections until ctx ends or Close is called, runs each
// flow on its own goroutine, records samples and results into rec (nil:
// none), and returns once all of them have ended. Cancelling ctx also
// ends the flows under way.
func (s *Server) Serve(ctx context.Context, rec Recorder) error {
	rec = orDiscard(rec)
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := s.ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("traffic: accept: %w", err)
		}
		wg.Go(func() {
			res := s.serve(ctx, c, rec)
			rec.Record(res.Record())
			s.mu.Lock()
			s.results = append(s.results, res)
			s.mu.Unlock()
		})
	}
}

// serve runs one accepted connection's flow.
func (s *Server) serve(ctx context.Context, c *net.TCPConn, rec Recorder) Result {
	defer c.Close()
	start := time.Now()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.SetReadDeadline(start.Add(s.opts.HeaderTimeout))
	f, err := readHeader(c)
	if err != nil {
		return Result{Flow: Flow{ID: c.RemoteAddr().String()}, Role: Receiver, Protocol: protocolOf(c),
			Start: start, Completion: time.Since(start), Err: err}
	}
	f.Protocol = protocolOf(c)
	c.SetReadDeadline(time.Time{})
	var res Result
	if rc, err := c.SyscallConn(); err != nil {
		res = Result{Err: err}
	} else if err := setCongestion(rc, f.CongestionControl); err != nil {
		res = Result{Err: err}
	} else if f.Direction == Download {
		return ctxResult(ctx, runSender(c, f, start, rec))
	} else {
		return ctxResult(ctx, runReceiver(c, f, start, rec))
	}
	res.Flow, res.Protocol, res.Start, res.Completion = f, f.Protocol, start, time.Since(start)
	res.Role = Receiver
	if f.Direction == Download {
		res.Role = Sender
	}
	res.Err = &FlowError{Flow: f.ID, Op: "set up", Err: res.Err}
	return res
}
