// Package lispgro makes the device that gives LISP-GPE the Linux kernel's
// GRO. The kernel aggregates the UDP packets of a tunnel only for a port
// that a tunnel's socket of its own claims, with a GRO handler for the
// tunnel's header. LISP (UDP 4341) has none, but LISP-GPE's header
// (RFC 9305) has VXLAN-GPE's layout, whose handler reads the next
// protocol and aggregates the inner IP packets: a VXLAN-GPE device in
// collect-metadata mode on port 4341 opens such a socket. lispd's data
// plane takes the packets it aggregates at tc ingress, ahead of the
// socket; what reaches the socket itself, the data plane drops at the
// device's ingress.
package lispgro

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Name is the device's name, one per network namespace (the port can be
// bound once).
const Name = "lispgro"

// Port is LISP's data port.
const Port = 4341

// Supported says whether a kernel release has VXLAN-GPE GRO that reads
// the payload by its next protocol: before Linux 6.5 it took it for an
// Ethernet frame.
func Supported(release string) error {
	major, minor, ok := version(release)
	switch {
	case !ok:
		return fmt.Errorf("cannot read the kernel release %q", release)
	case major < 6 || major == 6 && minor < 5:
		return fmt.Errorf("kernel %s is older than 6.5: its VXLAN-GPE GRO reads the payload of LISP-GPE as Ethernet", release)
	}
	return nil
}

// version reads "6.18.44-fc-v669" (or "6.10-rc1") as 6, 18.
func version(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	digits := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if digits >= 0 {
		parts[1] = parts[1][:digits]
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// Create makes the device, down, in the calling thread's network
// namespace: VXLAN with GPE, collect-metadata (no VNI of its own: it
// takes every packet), no learning, on Port. vishvananda/netlink does not
// know the GPE flag, hence the request by hand.
func Create(name string) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("vxlan"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	data.AddRtAttr(unix.IFLA_VXLAN_COLLECT_METADATA, []byte{1})
	data.AddRtAttr(unix.IFLA_VXLAN_LEARNING, []byte{0})
	data.AddRtAttr(unix.IFLA_VXLAN_PORT, binary.BigEndian.AppendUint16(nil, Port))
	data.AddRtAttr(unix.IFLA_VXLAN_GPE, nil)
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("make a VXLAN-GPE device (a kernel with CONFIG_VXLAN): %w", err)
		}
		return fmt.Errorf("make a VXLAN-GPE device: %w", err)
	}
	return nil
}

// Find returns the device of that name in the calling thread's network
// namespace, if it is one Create made: a lispd before this one left it
// (a restart). It returns nil, nil when there is none.
func Find(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok || !vx.FlowBased || vx.Port != Port {
		return nil, fmt.Errorf("%s exists and is not a collect-metadata VXLAN device on port %d", name, Port)
	}
	return l, nil
}
