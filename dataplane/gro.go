package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/lispgro"
)

// GRO for LISP-GPE. With lisp-gpe.gro on, lispd keeps a VXLAN-GPE device
// (internal/lispgro) in its namespace, whose UDP socket on port 4341 makes
// the kernel aggregate arriving LISP-GPE packets of a flow before tc sees
// them: the ETR and the RTR then take a 64 KB packet where they took 40
// MTU-sized ones, as a router takes what it forwards. The ETR
// decapsulates the aggregate as it does a GSO packet, and the RTR sends it
// on, to be segmented again on the way out. What the socket would receive
// itself (packets to this router that no RLOC interface's program took)
// the device's ingress drops: gro_sink.

// groDevice is lispd's GRO device, set up.
type groDevice struct {
	ifc  *net.Interface
	made bool            // by this lispd, not left by the one before
	nl   *netlink.Handle // in the device's namespace, whatever thread closes it
}

// openGRO finds the device a lispd before this one left (a restart) or
// makes it, and sets it up: no IPv6 (it is no link anyone is on),
// forwarding off, up. The caller attaches gro_sink to it.
func openGRO() (*groDevice, error) {
	if err := lispgro.Supported(kernelRelease()); err != nil {
		return nil, err
	}
	l, err := lispgro.Find(lispgro.Name)
	if err != nil {
		return nil, err
	}
	made := false
	if l == nil {
		if err := lispgro.Create(lispgro.Name); err != nil {
			return nil, err
		}
		made = true
	}
	g, err := configureGRO()
	if err != nil {
		if made {
			removeGRO()
		}
		return nil, err
	}
	g.made = made
	return g, nil
}

// remove deletes the device; close only lets go of it (a restart keeps
// it).
func (g *groDevice) remove() error {
	defer g.close()
	l, err := g.nl.LinkByIndex(g.ifc.Index)
	if err == nil {
		err = g.nl.LinkDel(l)
	}
	if err != nil {
		return fmt.Errorf("dataplane: delete %s: %w", lispgro.Name, err)
	}
	return nil
}

func (g *groDevice) close() { g.nl.Close() }

// configureGRO sets the device in the calling thread's namespace up, and
// holds a netlink handle there.
func configureGRO() (*groDevice, error) {
	for _, s := range []struct{ path, value string }{
		{"ipv6/conf/" + lispgro.Name + "/disable_ipv6", "1"},
		{"ipv4/conf/" + lispgro.Name + "/forwarding", "0"},
	} {
		if err := os.WriteFile("/proc/sys/net/"+s.path, []byte(s.value), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("set %s: %w", s.path, err)
		}
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	l, err := h.LinkByName(lispgro.Name)
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("set %s up: %w", lispgro.Name, err)
	}
	return &groDevice{ifc: &net.Interface{Index: l.Attrs().Index, Name: lispgro.Name}, nl: h}, nil
}

// removeGRO deletes the device in the calling thread's namespace, if
// there is one: a lispd before left it, and GRO is off now, or setting it
// up failed. A device of that name that is not lispd's is left alone.
func removeGRO() error {
	l, err := lispgro.Find(lispgro.Name)
	if err != nil || l == nil {
		return nil
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("dataplane: delete %s: %w", lispgro.Name, err)
	}
	return nil
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// gpeFlags says which hops of a path accept LISP-GPE: the first
// (GPE_FIRST) and the one after self (GPE_NEXT), self being the index of
// this router's RLOC among them or noSelf.
func gpeFlags(peers []netip.Prefix, p Path, self uint8) uint8 {
	accepts := func(i int) bool {
		if i >= len(p.Hops) || p.Hops[i].Lookup {
			return false
		}
		a := p.Hops[i].Addr.Unmap()
		return slices.ContainsFunc(peers, func(pr netip.Prefix) bool { return pr.Contains(a) })
	}
	var f uint8
	if accepts(0) {
		f |= gpeFirst
	}
	if self != noSelf && accepts(int(self)+1) {
		f |= gpeNext
	}
	return f
}
