package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/nsnet"
)

// path is one variant's network, set up: the chain of namespaces, the
// programs running in them, and what the measurements read.
type path struct {
	variant *Variant
	net     *nsnet.Net
	client  *nsnet.Node
	r1, r2  *nsnet.Node // r2 is nil with two routers
	r3      *nsnet.Node
	server  *nsnet.Node
	// underlay are the links between routers, which the profiles change;
	// defaults holds veth's offloads, which the gso profile restores.
	underlay []*nsnet.Veth
	defaults Offloads
	// serverLink is r3—server: its server end counts the packets.
	// lastHop is the underlay link into r3.
	serverLink, lastHop *nsnet.Veth
	procs               []*process // lispds, then the iperf3 server
	passXDP             io.Closer  // plain-xdp's program on r3
	iperfServer         *process
	devices             []device // other than veths: VXLAN
}

// device is an interface the bench created in a node, removed by name.
type device struct {
	nd   *nsnet.Node
	name string
}

// build makes the chain client — r1 — [r2] — r3 — server with the
// addresses of the plan, forwarding on the routers and default routes on
// the hosts. The routes between the sites are the variant's business.
func (p *path) build() error {
	n := p.net
	var err error
	for _, nd := range []struct {
		to   **nsnet.Node
		name string
	}{{&p.client, "client"}, {&p.r1, "r1"}, {&p.r2, "r2"}, {&p.r3, "r3"}, {&p.server, "server"}} {
		if nd.name == "r2" && p.variant.Routers < 3 {
			continue
		}
		if *nd.to, err = n.Node(nd.name); err != nil {
			return err
		}
	}
	if _, err := n.Link(p.client, p.r1, clientAddr, r1Site); err != nil {
		return err
	}
	if p.r2 == nil {
		l, err := n.Link(p.r1, p.r3, r1Under13, r3Under13)
		if err != nil {
			return err
		}
		p.underlay, p.lastHop = []*nsnet.Veth{l}, l
	} else {
		l12, err := n.Link(p.r1, p.r2, r1Under12, r2Under12)
		if err != nil {
			return err
		}
		l23, err := n.Link(p.r2, p.r3, r2Under23, r3Under23)
		if err != nil {
			return err
		}
		p.underlay, p.lastHop = []*nsnet.Veth{l12, l23}, l23
	}
	if p.serverLink, err = n.Link(p.r3, p.server, r3Site, serverAddr); err != nil {
		return err
	}
	for _, r := range p.routers() {
		if err := r.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
	}
	if err := p.client.Route("default", ip(r1Site)); err != nil {
		return err
	}
	if err := p.server.Route("default", ip(r3Site)); err != nil {
		return err
	}
	return p.readDefaults()
}

func (p *path) routers() []*nsnet.Node {
	if p.r2 == nil {
		return []*nsnet.Node{p.r1, p.r3}
	}
	return []*nsnet.Node{p.r1, p.r2, p.r3}
}

// routePlain routes between the sites hop by hop, as plain IP does.
func (p *path) routePlain() error {
	if p.r2 == nil {
		if err := p.r1.Route(siteB, ip(r3Under13)); err != nil {
			return err
		}
		return p.r3.Route(siteA, ip(r1Under13))
	}
	for _, r := range []struct {
		nd       *nsnet.Node
		dst, via string
	}{
		{p.r1, siteB, ip(r2Under12)},
		{p.r2, siteB, ip(r3Under23)}, {p.r2, siteA, ip(r1Under12)},
		{p.r3, siteA, ip(r2Under23)},
	} {
		if err := r.nd.Route(r.dst, r.via); err != nil {
			return err
		}
	}
	return nil
}

// routeVXLAN joins r1 and r3 with a VXLAN device each, over their
// underlay link, and routes the sites over it. The devices' MTU is the
// kernel's choice (the underlay's less 50): the hosts learn it by path
// MTU discovery, as they would behind a real VXLAN.
func (p *path) routeVXLAN() error {
	l := p.underlay[0]
	for _, e := range []struct {
		nd                *nsnet.Node
		local, remote     string
		inner, dst, viaIn string
	}{
		{p.r1, r1Under13, r3Under13, r1VXLAN, siteB, ip(r3VXLAN)},
		{p.r3, r3Under13, r1Under13, r3VXLAN, siteA, ip(r1VXLAN)},
	} {
		lower, err := e.nd.NL.LinkByName(l.Iface(e.nd))
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", l.Iface(e.nd), e.nd.Name, err)
		}
		name, err := p.net.IfName("x")
		if err != nil {
			return err
		}
		vx := &netlink.Vxlan{
			LinkAttrs:    netlink.LinkAttrs{Name: name},
			VxlanId:      vni,
			VtepDevIndex: lower.Attrs().Index,
			SrcAddr:      net.ParseIP(ip(e.local)),
			Group:        net.ParseIP(ip(e.remote)), // unicast: the one remote end
			Port:         4789,
			Learning:     false,
		}
		if err := e.nd.NL.LinkAdd(vx); err != nil {
			return fmt.Errorf("add VXLAN device %s in %s: %w", name, e.nd.Name, err)
		}
		p.devices = append(p.devices, device{e.nd, name})
		if err := e.nd.Up(name, e.inner); err != nil {
			return err
		}
		if err := e.nd.Route(e.dst, e.viaIn); err != nil {
			return err
		}
	}
	return nil
}

// readDefaults reads veth's offloads on an underlay end, which the gso
// profile keeps and restores.
func (p *path) readDefaults() error {
	l := p.underlay[0]
	return l.A.NS.Do(func() (err error) {
		p.defaults, err = getOffloads(l.IfA)
		return err
	})
}

// apply sets the profile's offloads on both ends of every underlay link.
// Where a variant's XDP program fixed TSO off (a veth whose peer runs
// XDP), setOffloads leaves it so: such variants run in the wire profile
// only.
func (p *path) apply(prof *Profile) error {
	want := p.defaults
	if prof.Underlay != nil {
		want = *prof.Underlay
	}
	for _, l := range p.underlay {
		for _, e := range []struct {
			nd    *nsnet.Node
			iface string
		}{{l.A, l.IfA}, {l.B, l.IfB}} {
			err := e.nd.NS.Do(func() error { return setOffloads(e.iface, want) })
			if err != nil {
				return fmt.Errorf("profile %s in %s: %w", prof.Name, e.nd.Name, err)
			}
		}
	}
	return nil
}

// stopAll stops the programs, the iperf3 server first.
func (p *path) stopAll() {
	for i := len(p.procs) - 1; i >= 0; i-- {
		p.procs[i].stop()
	}
	p.procs, p.iperfServer = nil, nil
}

// close stops the programs and removes the devices, links and
// namespaces by name.
func (p *path) close() error {
	p.stopAll()
	var errs []error
	if p.passXDP != nil {
		errs = append(errs, p.passXDP.Close())
		p.passXDP = nil
	}
	for _, d := range p.devices {
		if link, err := d.nd.NL.LinkByName(d.name); err == nil {
			if err := d.nd.NL.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("delete %s in %s: %w", d.name, d.nd.Name, err))
			}
		}
	}
	p.devices = nil
	errs = append(errs, p.net.Close())
	return errors.Join(errs...)
}

// dead returns the failure of a program of the path that has exited.
func (p *path) dead() error {
	for _, pr := range p.procs {
		if pr.exited() {
			return pr.failure()
		}
	}
	return nil
}

// ip is the address of a CIDR of the plan.
func ip(cidr string) string {
	a, _, _ := strings.Cut(cidr, "/")
	return a
}
