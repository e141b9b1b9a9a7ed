package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/amptcp/amptcp/internal/testnet"
)

// stream is a long-lived connection for the path manager to work on: a
// client writes pseudo-random bytes at a steady rate until finished, and
// a server hashes what arrives, so that the bytes are checked end to end
// however many subflows carried them.
type stream struct {
	conn     net.Conn
	ln       net.Listener
	received atomic.Int64
	sent     hash.Hash
	stop     chan struct{}
	wrote    chan error
	got      chan [32]byte
}

// Local and Remote are the connection's first subflow's addresses.
func (s *stream) Local() netip.AddrPort  { return s.conn.LocalAddr().(*net.TCPAddr).AddrPort() }
func (s *stream) Remote() netip.AddrPort { return s.conn.RemoteAddr().(*net.TCPAddr).AddrPort() }

// startStream connects from a host to a server it starts on another, on
// server (port 0), and writes chunk bytes every period, or as fast as the
// connection takes them with period 0.
func startStream(ctx context.Context, from, to *testnet.Node, d *net.Dialer, server string, chunk int, period time.Duration) (*stream, error) {
	ln, err := to.Listen("tcp", net.JoinHostPort(server, "0"))
	if err != nil {
		return nil, err
	}
	s := &stream{ln: ln, sent: sha256.New(), stop: make(chan struct{}), wrote: make(chan error, 1), got: make(chan [32]byte, 1)}
	go s.serve()
	if s.conn, err = from.Dial(ctx, d, "tcp", ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	go s.write(chunk, period)
	return s, nil
}

func (s *stream) serve() {
	defer close(s.got)
	c, err := s.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for {
		n, err := c.Read(buf)
		h.Write(buf[:n])
		s.received.Add(int64(n))
		if err == io.EOF {
			s.got <- [32]byte(h.Sum(nil))
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *stream) write(chunk int, period time.Duration) {
	buf := make([]byte, chunk)
	var x uint64 = 0x9e3779b97f4a7c15
	var tick <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.stop:
			s.wrote <- nil
			return
		default:
		}
		if tick != nil {
			select {
			case <-s.stop:
				s.wrote <- nil
				return
			case <-tick:
			}
		}
		for i := range buf {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			buf[i] = byte(x)
		}
		s.sent.Write(buf)
		s.conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
		if _, err := s.conn.Write(buf); err != nil {
			s.wrote <- fmt.Errorf("write: %w", err)
			return
		}
	}
}

// finish stops writing, closes the connection and checks that the server
// got every byte that was written.
func (s *stream) finish() error {
	defer s.ln.Close()
	defer s.conn.Close()
	close(s.stop)
	if err := <-s.wrote; err != nil {
		return err
	}
	s.conn.(*net.TCPConn).CloseWrite()
	select {
	case h, ok := <-s.got:
		if !ok || h != [32]byte(s.sent.Sum(nil)) {
			return errors.New("the server received other bytes than were sent")
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the server did not see the end of the stream (%d bytes received)", s.received.Load())
	}
}
