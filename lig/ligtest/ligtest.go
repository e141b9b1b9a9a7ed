// Package ligtest runs a fake map-resolver on loopback, for tests of code
// that sends encapsulated Map-Requests (lig, and later the ITR). It
// answers from another address than the one it listens on, as a
// map-server proxying for an ETR or the ETR itself do, so that a test
// also proves that the requester takes replies from anyone.
package ligtest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// Request is one request the resolver received.
type Request struct {
	N          int            // 1 for the first request
	From       netip.AddrPort // outer source
	ECM        *lisp.ECM
	MapRequest *lisp.MapRequest
	// ReplyTo is where a reply goes: the first ITR-RLOC, at the inner UDP
	// source port (RFC 9301 §5.5).
	ReplyTo netip.AddrPort

	t testing.TB
}

// Reply encodes a Map-Reply to the request with its nonce.
func (r *Request) Reply(records ...lisp.MapRecord) []byte {
	return r.ReplyWithNonce(r.MapRequest.Nonce, records...)
}

// ReplyWithNonce encodes a Map-Reply with any nonce, to play a spoofer.
func (r *Request) ReplyWithNonce(nonce uint64, records ...lisp.MapRecord) []byte {
	b, err := (&lisp.MapReply{Nonce: nonce, Records: records}).AppendBinary(nil)
	if err != nil {
		r.t.Errorf("ligtest: encode map-reply: %v", err)
	}
	return b
}

// A Handler answers a request with the datagrams to send to its ReplyTo,
// in order: Map-Replies, garbage, anything. None drops the request.
type Handler func(req *Request) [][]byte

// Resolver is a fake map-resolver.
type Resolver struct {
	Addr    netip.AddrPort // where to send requests
	Replier netip.AddrPort // where replies come from

	t       testing.TB
	in, out *net.UDPConn
	handler Handler
	done    chan struct{}
	mu      sync.Mutex
	reqs    []Request
}

// NewResolver starts a resolver on 127.0.0.1 that answers from 127.0.0.2
// (any 127/8 address is local on Linux), or from another port of
// 127.0.0.1 where that cannot be bound. It stops when the test ends.
// Packets that are not an ECM holding a Map-Request fail the test.
func NewResolver(t testing.TB, h Handler) *Resolver {
	t.Helper()
	in, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("ligtest: listen: %v", err)
	}
	out, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		out, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	}
	if err != nil {
		in.Close()
		t.Fatalf("ligtest: listen: %v", err)
	}
	r := &Resolver{
		Addr:    in.LocalAddr().(*net.UDPAddr).AddrPort(),
		Replier: out.LocalAddr().(*net.UDPAddr).AddrPort(),
		t:       t, in: in, out: out, handler: h, done: make(chan struct{}),
	}
	go r.serve()
	t.Cleanup(func() {
		in.Close()
		out.Close()
		<-r.done
	})
	return r
}

// Requests are the requests received so far.
func (r *Resolver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

func (r *Resolver) serve() {
	defer close(r.done)
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.in.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			r.t.Errorf("ligtest: read: %v", err)
			return
		}
		req, ok := r.decode(buf[:n], from)
		if !ok {
			continue
		}
		for _, pkt := range r.handler(req) {
			if _, err := r.out.WriteToUDPAddrPort(pkt, req.ReplyTo); err != nil {
				r.t.Errorf("ligtest: reply to %s: %v", req.ReplyTo, err)
			}
		}
	}
}

func (r *Resolver) decode(pkt []byte, from netip.AddrPort) (*Request, bool) {
	m, err := lisp.Parse(pkt)
	if err != nil {
		r.t.Errorf("ligtest: request from %s: %v", from, err)
		return nil, false
	}
	ecm, ok := m.(*lisp.ECM)
	if !ok {
		r.t.Errorf("ligtest: got %s from %s, want an ECM", m.Type(), from)
		return nil, false
	}
	mreq, ok := ecm.Message.(*lisp.MapRequest)
	if !ok {
		r.t.Errorf("ligtest: ECM from %s holds %s, want a Map-Request", from, ecm.Message.Type())
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	req := Request{
		N: len(r.reqs) + 1, From: from, ECM: ecm, MapRequest: mreq,
		ReplyTo: netip.AddrPortFrom(mreq.ITRRLOCs[0].IP(), ecm.Source.Port()),
		t:       r.t,
	}
	r.reqs = append(r.reqs, req)
	return &req, true
}
