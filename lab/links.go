package lab

import (
	"fmt"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"

	"github.com/amptcp/amptcp/lab/topo"
)

// LinkMaker creates the two ends of a link that is not emulated, each in
// its namespace with its name; Up then sets their MTU and addresses and
// brings them up. (The emulated links, those with a rate, delay, loss or
// queue, are TAP devices that the lab's link daemon creates and serves:
// see linkd.go.)
type LinkMaker interface {
	MakeLink(l topo.LinkPlan) error
}

// Veth makes links as veth pairs, created inside their namespaces: end a
// is born in a's namespace and its peer directly in b's, so no end ever
// appears in the caller's namespace.
type Veth struct{}

// MakeLink creates the veth pair of l.
func (Veth) MakeLink(l topo.LinkPlan) error {
	a, err := handleAt(l.A.Namespace)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := vns.GetFromName(l.B.Namespace)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", l.B.Namespace, err)
	}
	defer b.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.A.Interface},
		PeerName:      l.B.Interface,
		PeerNamespace: netlink.NsFd(b),
	}
	if err := a.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s - %s/%s: %w", l.A.Namespace, l.A.Interface, l.B.Namespace, l.B.Interface, err)
	}
	return nil
}

// handleAt opens a netlink handle in the named namespace.
func handleAt(ns string) (*netlink.Handle, error) {
	fd, err := vns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer fd.Close()
	h, err := netlink.NewHandleAt(fd)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	return h, nil
}
