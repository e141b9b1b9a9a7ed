package testnet

import (
	"context"
	"fmt"
	"net"
)

// ListenUDP opens a UDP socket inside the node, bound to addr ("10.0.2.2:0",
// "[fd00:2::2]:4341"); network is "udp", "udp4" or "udp6". The socket stays
// in the namespace and is usable from any goroutine; cleanup closes it.
func (nd *Node) ListenUDP(network, addr string) (*net.UDPConn, error) {
	laddr, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", nd.name, err)
	}
	var c *net.UDPConn
	err = nd.Do(func() (err error) {
		c, err = net.ListenUDP(network, laddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", nd.name, err)
	}
	nd.net.track(c)
	return c, nil
}

// Listen opens a stream listener inside the node, like net.Listen (so TCP
// listeners use MPTCP when the kernel offers it); cleanup closes it.
func (nd *Node) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := nd.Do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", nd.name, err)
	}
	nd.net.track(l)
	return l, nil
}

// Dial connects from inside the node with d (nil: a zero net.Dialer);
// cleanup closes the connection. Give a numeric address: for a host name
// with several addresses the dialer races them on goroutines that are not
// in the namespace.
func (nd *Node) Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	var c net.Conn
	err := nd.Do(func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial from %s: %w", nd.name, err)
	}
	nd.net.track(c)
	return c, nil
}
