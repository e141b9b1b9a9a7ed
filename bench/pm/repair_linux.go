package pm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/mptcp"
)

// setupTimeout bounds the wait for a new connection's two subflows to
// carry data, which takes milliseconds.
const setupTimeout = 10 * time.Second

// pollEvery is how often the subflows are read while waiting.
const pollEvery = 2 * time.Millisecond

// measure times one repair: it dials a connection kept busy by a
// saturating sender, waits until both subflows carry data, fails the
// second path for outage, restores it and waits, up to timeout, until
// both subflows carry data again.
func (r *rig) measure(ctx context.Context, f string, outage, timeout time.Duration) (s Sample, err error) {
	conn, token, err := r.dial(ctx)
	if err != nil {
		return Sample{Error: err.Error()}, nil
	}
	stop := send(conn)
	defer stop()
	if _, err := r.carrying(ctx, token, setupTimeout); err != nil {
		return Sample{Error: fmt.Sprintf("before the failure: %v", err)}, nil
	}
	if err := r.fail(f); err != nil {
		return s, fmt.Errorf("fail the path: %w", err)
	}
	select {
	case <-time.After(outage):
	case <-ctx.Done():
	}
	if err := r.restore(f); err != nil {
		return s, fmt.Errorf("restore the path: %w", err)
	}
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	took, err := r.carrying(ctx, token, timeout)
	switch {
	case err == nil:
		return Sample{Recovered: true, RepairMS: float64(took.Microseconds()) / 1000}, nil
	case ctx.Err() != nil:
		return s, ctx.Err()
	case errors.Is(err, errNotCarrying):
		return Sample{}, nil // not recovered: a result
	}
	return s, err
}

// dial opens an MPTCP connection from the client's first address to the
// server and returns it with its token, once sock_diag shows it.
func (r *rig) dial(ctx context.Context) (net.Conn, uint32, error) {
	var conn net.Conn
	err := r.client.NS.Do(func() (err error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip(client1))}, Timeout: setupTimeout}
		d.SetMultipathTCP(true)
		conn, err = d.DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", ip(server), serverPort))
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("dial the server: %w", err)
	}
	local := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	subs, err := r.subflows()
	if err == nil {
		for _, s := range subs {
			if unmap(s.Local) == local && s.Token != 0 {
				return conn, s.Token, nil
			}
		}
		err = errors.New("sock_diag shows no MPTCP subflow from " + local.String())
	}
	conn.Close()
	return nil, 0, err
}

// send writes to conn as fast as it takes until stop is called; stop
// closes conn. Writes that time out while a path is down are retried.
func send(conn net.Conn) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		chunk := make([]byte, chunkSize)
		for {
			select {
			case <-done:
				return
			default:
			}
			conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := conn.Write(chunk); err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
				return
			}
		}
	}()
	return func() {
		close(done)
		conn.Close()
		<-stopped
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errNotCarrying is carrying's answer when the time is up.
var errNotCarrying = errors.New("the subflows did not all carry data")

// carrying waits until the connection has two established subflows that
// each acknowledged data since the wait began (or since they appeared),
// and returns how long that took; errNotCarrying after within.
func (r *rig) carrying(ctx context.Context, token uint32, within time.Duration) (time.Duration, error) {
	start := time.Now()
	acked := map[netip.AddrPort]uint64{}
	first := true
	for {
		subs, err := r.subflows()
		if err != nil {
			return 0, err
		}
		moving, established := 0, 0
		for _, s := range subs {
			if s.Token != token || s.State != tcpEstablished {
				continue
			}
			established++
			before, seen := acked[s.Local]
			switch {
			case !seen || first:
				acked[s.Local] = s.TCP.BytesAcked
			case s.TCP.BytesAcked > before:
				moving++
			}
		}
		first = false
		if established == 2 && moving == 2 {
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			return 0, fmt.Errorf("%w within %v: %d established, %d acknowledged data", errNotCarrying, within, established, moving)
		}
		select {
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// tcpEstablished is TCP_ESTABLISHED, as sock_diag reports it.
const tcpEstablished = 1

// subflows reads the client's MPTCP subflows.
func (r *rig) subflows() (subs []mptcp.Subflow, err error) {
	err = r.client.NS.Do(func() (err error) {
		subs, err = mptcp.Subflows()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the subflows: %w", err)
	}
	return subs, nil
}

func unmap(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }
