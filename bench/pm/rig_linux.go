package pm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/nsnet"
	"github.com/amptcp/amptcp/mptcp"
	pmd "github.com/amptcp/amptcp/pm"
)

// The rig's addresses:
//
//	client 10.1.1.2 ---- 10.1.1.1 r 10.2.0.1 ---- 10.2.0.2 server
//	client 10.1.2.2 ---- 10.1.2.1 r
//
// The client sends from 10.1.2.2 over the second link (a rule and
// routing table 102): that is the second path, which fails.
const (
	client1, router1 = "10.1.1.2/24", "10.1.1.1/24"
	client2, router2 = "10.1.2.2/24", "10.1.2.1/24"
	routerS, server  = "10.2.0.1/24", "10.2.0.2/24"
	secondTable      = 102
	serverPort       = 5000
)

// rate shapes each of the client's links (tbf, RateMbps), so that a
// saturating sender fills both subflows at a cost of CPU that a shared
// machine affords.
const (
	rate      = RateMbps * 1e6 / 8 // bytes/s
	tbfBurst  = 32 << 10
	tbfLimit  = rate*20/1000 + tbfBurst // 20 ms of queue
	chunkSize = 64 << 10
)

// rig is one variant's network with its path manager and its server.
type rig struct {
	variant string
	net     *nsnet.Net
	client  *nsnet.Node
	router  *nsnet.Node
	server  *nsnet.Node
	second  *nsnet.Veth // the client's second link, which fails
	ln      net.Listener
	stopPM  func() error // stops amptcp pm, nil for the kernel's
}

// newRig builds the network of variant v and starts its path manager;
// dir holds amptcp pm's control socket.
func newRig(ctx context.Context, v string, prefix string, ifaces *nsnet.IfNames, dir string) (r *rig, err error) {
	r = &rig{variant: v, net: nsnet.New(prefix+v+"-", ifaces)}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
			r = nil
		}
	}()
	if err := r.build(); err != nil {
		return r, err
	}
	switch v {
	case VariantAMPTCP:
		r.stopPM, err = startPM(ctx, r.client, filepath.Join(dir, v+".sock"))
	case VariantKernel:
		err = r.kernelEndpoint()
	}
	if err != nil {
		return r, err
	}
	err = r.server.NS.Do(func() (err error) {
		var lc net.ListenConfig
		lc.SetMultipathTCP(true)
		// On all addresses: a join may come to any.
		r.ln, err = lc.Listen(context.Background(), "tcp", fmt.Sprintf("0.0.0.0:%d", serverPort))
		return err
	})
	if err != nil {
		return r, fmt.Errorf("listen on the server: %w", err)
	}
	go discard(r.ln)
	return r, nil
}

// build makes the namespaces, links, routes and shaping, and sets both
// ends' MPTCP limits.
func (r *rig) build() error {
	var err error
	for _, nd := range []struct {
		to   **nsnet.Node
		name string
	}{{&r.client, "c"}, {&r.router, "r"}, {&r.server, "s"}} {
		if *nd.to, err = r.net.Node(nd.name); err != nil {
			return err
		}
	}
	first, err := r.net.Link(r.client, r.router, client1, router1)
	if err != nil {
		return err
	}
	if r.second, err = r.net.Link(r.client, r.router, client2, router2); err != nil {
		return err
	}
	if _, err := r.net.Link(r.router, r.server, routerS, server); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return r.router.Sysctl("net.ipv4.ip_forward", "1") },
		func() error { return r.client.Route("default", ip(router1)) },
		func() error { return r.client.RuleFrom(ip(client2), secondTable) },
		func() error { return r.client.RouteIn(secondTable, "default", ip(router2)) },
		func() error { return r.server.Route("default", ip(routerS)) },
		func() error { return shape(r.client, first.Iface(r.client)) },
		func() error { return shape(r.client, r.second.Iface(r.client)) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	for _, nd := range []*nsnet.Node{r.client, r.server} {
		err := nd.NS.Do(func() error {
			c, err := mptcp.Dial()
			if err != nil {
				return err
			}
			defer c.Close()
			return c.SetLimits(mptcp.Limits{Subflows: 4, AddAddrAccepted: 4})
		})
		if err != nil {
			return fmt.Errorf("MPTCP limits in %s: %w", nd.Name, err)
		}
	}
	return nil
}

// shape limits what nd sends on iface to the rig's rate.
func shape(nd *nsnet.Node, iface string) error {
	link, err := nd.NL.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", iface, nd.Name, err)
	}
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       rate,
		Limit:      tbfLimit,
		Buffer:     netlink.Xmittime(rate, tbfBurst),
	}
	if err := nd.NL.QdiscAdd(q); err != nil {
		return fmt.Errorf("tbf on %s in %s: %w", iface, nd.Name, err)
	}
	return nil
}

// kernelEndpoint makes the client's second address an endpoint of the
// in-kernel path manager, which opens a subflow from it on every
// connection.
func (r *rig) kernelEndpoint() error {
	link, err := r.client.NL.LinkByName(r.second.Iface(r.client))
	if err != nil {
		return fmt.Errorf("find the second link: %w", err)
	}
	return r.client.NS.Do(func() error {
		c, err := mptcp.Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		err = c.AddEndpoint(mptcp.Addr{ID: 2, IP: netip.MustParseAddr(ip(client2)), IfIndex: link.Attrs().Index, Flags: mptcp.FlagSubflow})
		if err != nil {
			return fmt.Errorf("add the kernel's endpoint: %w", err)
		}
		return nil
	})
}

// startPM runs amptcp pm with policy fullmesh in nd until the returned
// function stops it, and waits until it answers on its control socket.
func startPM(ctx context.Context, nd *nsnet.Node, sock string) (stop func() error, err error) {
	cfg, err := pmd.Parse([]byte("policy: fullmesh\n"))
	if err != nil {
		return nil, err
	}
	cfg.Control.Socket = sock
	d, err := pmd.New(cfg, pmd.Deps{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- nd.NS.Do(func() error { return d.Run(ctx) }) }()
	stop = func() error {
		cancel()
		return <-done
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := pmd.QueryStatus(sock); err == nil {
			return stop, nil
		}
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("amptcp pm: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(errors.New("amptcp pm does not answer on its control socket"), stop())
		}
	}
}

// discard accepts connections and reads them to the end.
func discard(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

// close stops the path manager and the server and removes the network.
func (r *rig) close() error {
	var errs []error
	if r.stopPM != nil {
		if err := r.stopPM(); err != nil {
			errs = append(errs, fmt.Errorf("amptcp pm: %w", err))
		}
		r.stopPM = nil
	}
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	return errors.Join(append(errs, r.net.Close())...)
}

// fail fails the second path the way f says; restore undoes it.
func (r *rig) fail(f string) error {
	switch f {
	case FailureLink:
		return r.router.SetDown(r.second.Iface(r.router))
	case FailureBlackhole:
		return r.router.NL.RouteAdd(blackhole())
	}
	return fmt.Errorf("unknown failure %q", f)
}

func (r *rig) restore(f string) error {
	switch f {
	case FailureLink:
		return r.router.Up(r.second.Iface(r.router), "")
	case FailureBlackhole:
		return r.router.NL.RouteDel(blackhole())
	}
	return fmt.Errorf("unknown failure %q", f)
}

// blackhole is the router's route that drops what goes to the client's
// second address.
func blackhole() *netlink.Route {
	return &netlink.Route{Dst: &net.IPNet{IP: net.ParseIP(ip(client2)).To4(), Mask: net.CIDRMask(32, 32)}, Type: unix.RTN_BLACKHOLE}
}

// ip is the address of a CIDR.
func ip(cidr string) string { return netip.MustParsePrefix(cidr).Addr().String() }
