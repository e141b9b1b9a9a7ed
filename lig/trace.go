package lig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// ErrNoReferral is returned by Trace when a DDT node asked gave no
// Map-Referral after all the tries.
var ErrNoReferral = errors.New("lig: no map-referral received")

// MaxTraceDepth bounds the referrals a trace follows.
const MaxTraceDepth = 16

// referralPort is where the RLOCs of a referral set listen (referrals
// carry no port): 4342, but in tests.
var referralPort uint16 = Port

// Hop is one Map-Referral of a trace: the node that sent it, how long it
// took from the request it answers, and its first record.
type Hop struct {
	Node     netip.AddrPort
	RTT      time.Duration
	Tries    int // requests sent at this level, up to the one answered
	Referral lisp.ReferralRecord
}

// Trace resolves eid through the Delegated Database Tree (RFC 8111) the
// way a DDT map-resolver does, and records each step, as rig and lig do
// on DDT: it sends a DDT Map-Request (an ECM with the D bit) to
// opts.Resolver, a DDT node (the root), follows each NODE-REFERRAL and
// MS-REFERRAL to the next node, trying the RLOCs of a referral set in
// turn, until a map-server acknowledges (MS-ACK) or a negative referral
// ends the walk. After an MS-ACK it waits for the Map-Reply, from the
// map-server or the ETR. All requests carry the same nonce, which the
// Map-Reply echoes.
//
// The Result holds the Hops; Reply is nil after a negative referral,
// which is an answer, not an error. Without an answer Trace returns
// ErrNoReferral (or ErrNoReply after an MS-ACK), with the Result so far.
func Trace(ctx context.Context, eid netip.Addr, opts Options) (*Result, error) {
	q, done, err := startQuery(ctx, eid, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	opts = q.opts
	q.nonce = newNonce()
	q.res.Nonce = q.nonce
	set, toMS := []netip.AddrPort{q.res.Resolver}, false
	var last *mapping.EID
	for range MaxTraceDepth {
		hop, err := q.askLevel(ctx, set, toMS)
		if err != nil {
			return &q.res, err
		}
		q.res.Hops = append(q.res.Hops, hop)
		rec := hop.Referral
		key, err := mapping.FromWire(rec.EID, rec.MaskLen)
		if err != nil {
			return &q.res, fmt.Errorf("lig: referral from %s for %s: %w", hop.Node, rec.EID, err)
		}
		switch rec.Action {
		case lisp.ReferralNode, lisp.ReferralMS:
			if last != nil && key.Prefix.Bits() <= last.Prefix.Bits() {
				return &q.res, fmt.Errorf("lig: referral loop: %s refers to %s after %s", hop.Node, key, last)
			}
			last, set, toMS = &key, nil, rec.Action == lisp.ReferralMS
			for _, l := range rec.Referrals {
				if a := l.Address.IP(); a.IsValid() {
					set = append(set, netip.AddrPortFrom(a.Unmap(), referralPort))
				}
			}
			if len(set) == 0 {
				return &q.res, fmt.Errorf("lig: %s refers to %s with no referral address", hop.Node, key)
			}
		case lisp.ReferralMSAck:
			if q.res.Reply != nil {
				return &q.res, nil
			}
			done, err := q.receive(ctx, time.Now().Add(opts.Timeout))
			switch {
			case err != nil:
				return &q.res, err
			case !done:
				return &q.res, ErrNoReply
			}
			return &q.res, nil
		default: // a negative referral: the walk ends here
			return &q.res, nil
		}
	}
	return &q.res, fmt.Errorf("lig: more than %d referrals", MaxTraceDepth)
}

// startQuery opens the socket a query or trace receives on, with opts
// completed by their defaults; done closes it. A read deadline in the past
// wakes a blocked read when ctx ends.
func startQuery(ctx context.Context, eid netip.Addr, opts Options) (q *query, done func(), err error) {
	if !eid.IsValid() {
		return nil, nil, errors.New("lig: no EID")
	}
	if q, err = openQuery(eid, opts.withDefaults()); err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { q.conn.SetReadDeadline(time.Unix(1, 0)) })
	return q, func() { stop(); q.conn.Close() }, nil
}

// openQuery opens the socket a query or trace receives on, bound to the
// source address (the route's toward the first server if not given).
func openQuery(eid netip.Addr, opts Options) (*query, error) {
	if !opts.Resolver.Addr().IsValid() {
		return nil, errors.New("lig: no map-resolver")
	}
	source := opts.Source
	if !source.IsValid() {
		var err error
		if source, err = routeSource(opts.Resolver); err != nil {
			return nil, err
		}
	}
	if source.Is4() != opts.Resolver.Addr().Is4() {
		return nil, fmt.Errorf("lig: source %s and map-resolver %s differ in address family", source, opts.Resolver.Addr())
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(source, 0)))
	if err != nil {
		return nil, fmt.Errorf("lig: listen on %s: %w", source, err)
	}
	port := conn.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	q := &query{opts: opts, conn: conn, sent: make(map[uint64]time.Time), buf: make([]byte, 64<<10)}
	q.res = Result{
		EID:      eidAddress(eid, opts.IID, opts.HasIID),
		Resolver: opts.Resolver,
		Source:   netip.AddrPortFrom(source, port),
	}
	return q, nil
}

// askLevel sends the DDT Map-Request to the RLOCs of a referral set in
// turn, opts.Tries times in all, and returns the first Map-Referral from
// one of them.
func (q *query) askLevel(ctx context.Context, set []netip.AddrPort, toMS bool) (Hop, error) {
	ecm, err := NewRequest(q.res.EID, q.res.Source, q.nonce)
	if err != nil {
		return Hop{}, err
	}
	ecm.DDT, ecm.ToMS = true, toMS
	pkt, err := ecm.AppendBinary(nil)
	if err != nil {
		return Hop{}, fmt.Errorf("lig: encode map-request: %w", err)
	}
	asked := map[netip.AddrPort]time.Time{}
	for try := range q.opts.Tries {
		dst := set[try%len(set)]
		q.opts.Logf("Send DDT map-request to %s for %s ...", dst, q.res.EID)
		asked[dst] = time.Now()
		q.sent[q.nonce] = asked[dst] // a Map-Reply is timed from the last request
		q.res.Tries++
		if _, err := q.conn.WriteToUDPAddrPort(pkt, dst); err != nil {
			return Hop{}, fmt.Errorf("lig: send map-request to %s: %w", dst, err)
		}
		hop, ok, err := q.awaitReferral(ctx, asked, time.Now().Add(q.opts.Timeout))
		if err != nil || ok {
			hop.Tries = try + 1
			return hop, err
		}
	}
	return Hop{}, ErrNoReferral
}

// awaitReferral reads until a Map-Referral with the trace's nonce from a
// node asked, the deadline or the end of ctx. A Map-Reply with the nonce
// that comes first (a map-server answering before its MS-ACK) is kept.
func (q *query) awaitReferral(ctx context.Context, asked map[netip.AddrPort]time.Time, deadline time.Time) (Hop, bool, error) {
	for {
		pkt, from, ok, err := q.read(ctx, deadline)
		if err != nil || !ok {
			return Hop{}, false, err
		}
		m, err := lisp.Parse(pkt)
		if err != nil {
			q.res.Malformed++
			q.opts.Logf("ignoring malformed packet from %s: %v", from, err)
			continue
		}
		switch msg := m.(type) {
		case *lisp.MapReferral:
			at, ok := asked[from]
			if !ok || msg.Nonce != q.nonce || len(msg.Records) == 0 {
				q.res.Ignored++
				q.opts.Logf("ignoring map-referral from %s", from)
				continue
			}
			return Hop{Node: from, RTT: time.Since(at), Referral: msg.Records[0]}, true, nil
		case *lisp.MapReply:
			if q.res.Reply == nil {
				q.accept(pkt, from) // keeps it, or counts it
				continue
			}
		}
		q.res.Ignored++
		q.opts.Logf("ignoring %s from %s", m.Type(), from)
	}
}
