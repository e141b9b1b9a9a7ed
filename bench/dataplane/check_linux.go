package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// checkBytes is how much the traffic check sends: enough for full-sized
// segments and GSO super-packets, which a broken MTU stops while a SYN
// still passes.
const checkBytes = 4 << 20

// checkPort is where the check's sink listens in the server's namespace.
const checkPort = 5299

// waitTraffic sends checkBytes over TCP from the client to a sink on the
// server, again until one transfer completes or the deadline passes. The
// sockets are plain TCP (not MPTCP, which Go's listeners default to).
func (p *path) waitTraffic(ctx context.Context, deadline time.Time) (time.Duration, error) {
	var ln net.Listener
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	addr := net.JoinHostPort(serverIP, strconv.Itoa(checkPort))
	err := p.server.NS.Do(func() (err error) {
		ln, err = lc.Listen(ctx, "tcp4", addr)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("listen on the server: %w", err)
	}
	defer ln.Close()
	go sink(ln)
	var last error
	for {
		began := time.Now()
		err := p.transfer(ctx, addr, began.Add(3*time.Second))
		if err == nil {
			return time.Since(began), nil
		}
		last = err
		if dead := p.dead(); dead != nil {
			return 0, dead
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no traffic passes from the client to the server: %v%s", last, p.logTails())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// transfer sends checkBytes to the sink and checks the count it returns.
func (p *path) transfer(ctx context.Context, addr string, deadline time.Time) error {
	d := net.Dialer{Deadline: deadline}
	d.SetMultipathTCP(false)
	var c net.Conn
	err := p.client.NS.Do(func() (err error) {
		c, err = d.DialContext(ctx, "tcp4", addr)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(make([]byte, checkBytes)); err != nil {
		return fmt.Errorf("send %d bytes: %w", checkBytes, err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	var n [8]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return fmt.Errorf("read what the server received: %w", err)
	}
	if got := binary.BigEndian.Uint64(n[:]); got != checkBytes {
		return fmt.Errorf("the server received %d bytes of %d", got, checkBytes)
	}
	return nil
}

// sink counts what each connection sends until it closes its side, then
// answers with the count.
func sink(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			n, _ := io.Copy(io.Discard, c)
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(n))
			c.Write(b[:])
		}()
	}
}
