// Package lig is the LISP Internet Groper (RFC 6835): it asks a
// map-resolver for the mapping of an EID, the way an ITR does on a cache
// miss, and reports the Map-Reply that comes back, so that an operator
// can see what the mapping system says without running an xTR.
//
// Query sends the request and waits for the reply; WriteText and WriteJSON
// print the result. NewRequest builds the encapsulated Map-Request on its
// own, for other senders of Map-Requests.
package lig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// Defaults for Options, those of dmm-lig, the original lig: three tries,
// two seconds each.
const (
	DefaultTries   = 3
	DefaultTimeout = 2 * time.Second
)

// ErrNoReply is returned by Query when no acceptable Map-Reply arrived
// after all its tries.
var ErrNoReply = errors.New("lig: no map-reply received")

// Options say where and how to ask. Only Resolver is required.
type Options struct {
	// Resolver is the map-resolver; port 0 means 4342.
	Resolver netip.AddrPort
	// Source is the local address the reply must come back to: the
	// ITR-RLOC and the inner source of the request. The socket is bound to
	// it, so it must be local. The zero value means the source address of
	// the route toward Resolver.
	Source netip.Addr
	// IID, when HasIID is set, puts the EID in an Instance-ID LCAF. IID 0
	// is a valid instance, hence the separate flag.
	IID    uint32
	HasIID bool
	// SourceEID, when valid, is the request's source EID: the mapping
	// system then answers as it would the ITR of that EID's site, which
	// shows the ELPs a traffic-engineered site gets (docs/te.md).
	SourceEID netip.Addr
	// Tries is how many Map-Requests to send at most (DefaultTries if 0),
	// Timeout how long to wait after each (DefaultTimeout if 0).
	Tries   int
	Timeout time.Duration
	// Logf, if not nil, gets a line for each request sent and each packet
	// ignored, as lig prints them.
	Logf func(format string, args ...any)
}

// Result is what a query sent and the Map-Reply that answered it.
type Result struct {
	EID      lisp.Address   // the EID asked for, in its Instance-ID LCAF if any
	Resolver netip.AddrPort // where the requests went
	Source   netip.AddrPort // where the reply was expected: ITR-RLOC and socket port
	Tries    int            // requests sent, up to and including the one answered
	// Nonce is the nonce of the answered request, RTT the time from
	// sending it to the reply, Replier where the reply came from (the
	// map-server as a proxy, or the ETR) and Reply the reply itself. They
	// are zero when no reply came.
	Nonce   uint64
	RTT     time.Duration
	Replier netip.AddrPort
	Reply   *lisp.MapReply
	// Ignored counts well-formed packets that were not an answer (other
	// messages, Map-Replies with an unknown nonce), Malformed those that
	// did not decode.
	Ignored, Malformed int
	// Hops are the Map-Referrals of a Trace, from the root down.
	Hops []Hop
}

// Query sends Map-Requests for eid to opts.Resolver in ECMs, one try
// after another, and returns at the first Map-Reply whose nonce is one it
// sent, from whatever address. Each try has a new nonce; a late reply to
// an earlier try is accepted too, with its RTT measured from the request
// it answers, so a slow mapping system is not retried into failure.
//
// Once requests have been sent, the Result is returned even with an error
// (ErrNoReply, or an error wrapping ctx.Err() when ctx ends first), so
// that a caller can say how many tries were made and what was ignored.
func Query(ctx context.Context, eid netip.Addr, opts Options) (*Result, error) {
	q, done, err := startQuery(ctx, eid, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	opts = q.opts
	for try := 1; try <= opts.Tries; try++ {
		if err := q.send(); err != nil {
			return &q.res, err
		}
		q.res.Tries = try
		done, err := q.receive(ctx, time.Now().Add(opts.Timeout))
		if err != nil || done {
			return &q.res, err
		}
	}
	return &q.res, ErrNoReply
}

func (o Options) withDefaults() Options {
	if o.Tries <= 0 {
		o.Tries = DefaultTries
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Resolver.Port() == 0 {
		o.Resolver = netip.AddrPortFrom(o.Resolver.Addr(), Port)
	}
	o.Resolver = netip.AddrPortFrom(o.Resolver.Addr().Unmap(), o.Resolver.Port())
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// routeSource is the local address the kernel picks for packets to
// resolver: connecting a UDP socket chooses the route and sends nothing.
func routeSource(resolver netip.AddrPort) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(resolver))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("lig: no route to map-resolver %s: %w", resolver, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// query is the state of one Query.
type query struct {
	opts  Options
	conn  *net.UDPConn
	res   Result
	nonce uint64               // of the latest request
	sent  map[uint64]time.Time // every nonce sent, with when
	buf   []byte
}

// send sends one Map-Request with a new nonce.
func (q *query) send() error {
	q.nonce = newNonce()
	ecm, err := NewRequest(q.res.EID, q.res.Source, q.nonce)
	if err != nil {
		return err
	}
	if a := q.opts.SourceEID; a.IsValid() {
		ecm.Message.(*lisp.MapRequest).SourceEID = eidAddress(a.Unmap(), q.opts.IID, q.opts.HasIID)
	}
	pkt, err := ecm.AppendBinary(nil)
	if err != nil {
		return fmt.Errorf("lig: encode map-request: %w", err)
	}
	q.opts.Logf("Send map-request to %s for %s ...", q.res.Resolver, q.res.EID)
	q.sent[q.nonce] = time.Now()
	if _, err := q.conn.WriteToUDPAddrPort(pkt, q.res.Resolver); err != nil {
		return fmt.Errorf("lig: send map-request to %s: %w", q.res.Resolver, err)
	}
	return nil
}

// receive reads packets until an answer (done), the deadline (not done,
// no error) or the end of ctx.
func (q *query) receive(ctx context.Context, deadline time.Time) (done bool, err error) {
	for {
		pkt, from, ok, err := q.read(ctx, deadline)
		if err != nil || !ok {
			return false, err
		}
		if q.accept(pkt, from) {
			return true, nil
		}
	}
}

// read reads one datagram before the deadline (ok false after it) or the
// end of ctx (an error wrapping ctx.Err()).
func (q *query) read(ctx context.Context, deadline time.Time) (pkt []byte, from netip.AddrPort, ok bool, err error) {
	q.conn.SetReadDeadline(deadline)
	// Checked after setting the deadline: if ctx ended before, the
	// AfterFunc's past deadline was just overwritten.
	if err := ctx.Err(); err != nil {
		return nil, from, false, fmt.Errorf("lig: %w", err)
	}
	n, from, err := q.conn.ReadFromUDPAddrPort(q.buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if err := ctx.Err(); err != nil {
			return nil, from, false, fmt.Errorf("lig: %w", err)
		}
		return nil, from, false, nil
	}
	if err != nil {
		return nil, from, false, fmt.Errorf("lig: receive: %w", err)
	}
	return q.buf[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), true, nil
}

// accept takes pkt as the answer if it is a Map-Reply to one of the
// requests sent, and counts it otherwise.
func (q *query) accept(pkt []byte, from netip.AddrPort) bool {
	m, err := lisp.Parse(pkt)
	if err != nil {
		q.res.Malformed++
		q.opts.Logf("ignoring malformed packet from %s: %v", from, err)
		return false
	}
	reply, ok := m.(*lisp.MapReply)
	if !ok {
		q.res.Ignored++
		q.opts.Logf("ignoring %s from %s", m.Type(), from)
		return false
	}
	at, ok := q.sent[reply.Nonce]
	if !ok {
		q.res.Ignored++
		q.opts.Logf("ignoring map-reply from %s with nonce %#016x, want %#016x", from, reply.Nonce, q.nonce)
		return false
	}
	q.res.RTT = time.Since(at)
	q.res.Nonce = reply.Nonce
	q.res.Replier = from
	q.res.Reply = reply
	return true
}
