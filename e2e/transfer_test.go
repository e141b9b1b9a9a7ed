package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/amptcp/amptcp/internal/testnet"
)

// sendHashed sends n random bytes from a host to a server it starts on
// another (listening on server, port 0) that hashes what it receives, and
// checks the hash.
func sendHashed(ctx context.Context, from, to *testnet.Node, d *net.Dialer, server string, n int) error {
	ln, err := to.Listen("tcp", net.JoinHostPort(server, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		defer close(got)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		h := sha256.New()
		if _, err := io.Copy(h, c); err == nil {
			got <- [32]byte(h.Sum(nil))
		}
	}()
	c, err := from.Dial(ctx, d, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	c.SetDeadline(deadline)
	if _, err := c.Write(data); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case h, ok := <-got:
		if !ok || h != sha256.Sum256(data) {
			return errors.New("the server received other bytes than were sent")
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("transfer of %d bytes: %w", n, ctx.Err())
	}
}
