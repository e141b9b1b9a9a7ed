// Package mptcp talks to the kernel's Multipath TCP: the generic netlink
// family mptcp_pm (the event stream, the userspace path manager's
// commands, the in-kernel path manager's endpoints and limits, what
// `ip mptcp` does), the sock_diag view of MPTCP connections and their
// subflows (what `ss -M` and `ss -ti` show), and MPTCP_FULL_INFO for
// programs that own an MPTCP socket.
//
// Encoding and decoding are pure functions over bytes, tested against
// messages captured from the kernel; only Client and the diag and
// getsockopt calls touch the kernel. Facts and gotchas of this kernel's
// mptcp_pm: docs/kernel.md ("The userspace path manager's netlink
// family"); the reference is the kernel's YNL spec
// Documentation/netlink/specs/mptcp_pm.yaml.
package mptcp

import (
	"fmt"
	"net/netip"
	"strings"
)

// EventType is the kind of an mptcp_pm event (MPTCP_EVENT_*).
type EventType uint8

// The events of the mptcp_pm_events multicast group.
const (
	EventCreated         EventType = 1
	EventEstablished     EventType = 2
	EventClosed          EventType = 3
	EventAnnounced       EventType = 6
	EventRemoved         EventType = 7
	EventSubEstablished  EventType = 10
	EventSubClosed       EventType = 11
	EventSubPriority     EventType = 13
	EventListenerCreated EventType = 15
	EventListenerClosed  EventType = 16
)

var eventNames = map[EventType]string{
	EventCreated: "created", EventEstablished: "established", EventClosed: "closed",
	EventAnnounced: "announced", EventRemoved: "removed",
	EventSubEstablished: "sub_established", EventSubClosed: "sub_closed", EventSubPriority: "sub_priority",
	EventListenerCreated: "listener_created", EventListenerClosed: "listener_closed",
}

func (t EventType) String() string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is one mptcp_pm event. Fields the event does not carry are zero.
// Addresses are unmapped: a listener on [::] reports IPv4 peers as
// ::ffff:a.b.c.d, which Event holds as a.b.c.d.
type Event struct {
	Type  EventType
	Token uint32
	// Local and Remote are the subflow's (or, for connection events, the
	// first subflow's) addresses and ports; for ANNOUNCED, Remote is the
	// announced address.
	Local, Remote     netip.AddrPort
	LocalID, RemoteID uint8
	Backup            bool
	// Server is set on the listening side's connections (FLAGS bit
	// EventFlagServerSide, or the older SERVER_SIDE attribute).
	Server bool
	// Flags is the FLAGS attribute (EventFlag*), as the kernel sent it.
	Flags uint16
	// Error is the socket error of a closed subflow (an errno), 0 if none.
	Error       uint8
	Timeout     uint32
	IfIndex     int
	ResetReason uint32
	ResetFlags  uint32
}

// AddrFlags are MPTCP_PM_ADDR_FLAG_*.
type AddrFlags uint32

// The address flags.
const (
	FlagSignal   AddrFlags = 1 << 0
	FlagSubflow  AddrFlags = 1 << 1
	FlagBackup   AddrFlags = 1 << 2
	FlagFullmesh AddrFlags = 1 << 3
	FlagImplicit AddrFlags = 1 << 4
)

var addrFlagNames = []struct {
	f    AddrFlags
	name string
}{{FlagSignal, "signal"}, {FlagSubflow, "subflow"}, {FlagBackup, "backup"}, {FlagFullmesh, "fullmesh"}, {FlagImplicit, "implicit"}}

// String lists the flags as `ip mptcp endpoint show` does ("signal backup").
func (f AddrFlags) String() string {
	var names []string
	for _, n := range addrFlagNames {
		if f&n.f != 0 {
			names = append(names, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(f)))
	}
	return strings.Join(names, " ")
}

// Addr is an address of the mptcp_pm family (MPTCP_PM_ATTR_ADDR): an
// endpoint of the in-kernel path manager, or a subflow's local end in
// SUBFLOW_CREATE and SUBFLOW_DESTROY.
type Addr struct {
	ID      uint8
	IP      netip.Addr
	Port    uint16
	IfIndex int
	Flags   AddrFlags
}

// Limits are the in-kernel path manager's limits (`ip mptcp limits`),
// which the kernel also applies to joins a userspace-managed server
// accepts.
type Limits struct {
	Subflows        uint32 // MPTCP_PM_ATTR_SUBFLOWS
	AddAddrAccepted uint32 // MPTCP_PM_ATTR_RCV_ADD_ADDRS
}

// String formats the address as `ip mptcp endpoint show` does:
// "10.0.1.1 port 4242 id 5 signal dev#3".
func (a Addr) String() string {
	var b strings.Builder
	b.WriteString(a.IP.String())
	if a.Port != 0 {
		fmt.Fprintf(&b, " port %d", a.Port)
	}
	fmt.Fprintf(&b, " id %d", a.ID)
	if a.Flags != 0 {
		b.WriteString(" " + a.Flags.String())
	}
	if a.IfIndex != 0 {
		fmt.Fprintf(&b, " dev#%d", a.IfIndex)
	}
	return b.String()
}
