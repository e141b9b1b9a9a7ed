// Package dataplane is the forwarding half of lispd's xtr and rtr roles:
// eBPF programs (C, in bpf/) attached to tc ingress that encapsulate
// (ITR), decapsulate (ETR, also in XDP ahead of GRO on the interfaces
// named) and re-encapsulate along Explicit Locator Paths (RTR), a
// map-cache in BPF maps that the control plane fills, and the MPTCP
// subflow table that keeps each subflow on its own path.
//
// The control plane drives it through Put and Delete, learns of
// map-cache misses from Misses, and holds the packets that missed
// (Held) until it releases them (Release); everything else (which
// packets are encapsulated to where) is decided in the kernel.
package dataplane

import (
	"net/netip"
	"time"
)

// Key names a map-cache entry: an EID-prefix in an instance.
type Key struct {
	InstanceID uint32 // 24 bits
	Prefix     netip.Prefix
}

// Action is what the ITR does with packets whose destination matches an
// entry.
type Action uint8

const (
	// Encapsulate sends packets on the entry's paths. An entry with no
	// path that is up drops them, counted.
	Encapsulate Action = iota
	// NativelyForward hands packets to the kernel unencapsulated: for
	// negative Map-Replies that say so, and for the site's own EIDs.
	NativelyForward
	// Drop drops packets, counted.
	Drop
	// SendMapRequest drops packets and reports a miss (rate-limited), as
	// when there is no entry at all.
	SendMapRequest
	// Hold hands the site's packets to the control plane (Held), behind
	// those it holds, while it releases these: what it releases takes
	// the entry's paths, or is forwarded natively when it has none.
	Hold
)

var actionNames = [...]string{"encapsulate", "natively-forward", "drop", "send-map-request", "hold"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// Hop is a hop of an Explicit Locator Path, with its bits.
type Hop struct {
	Addr                  netip.Addr
	Lookup, Probe, Strict bool
}

// Path is one way to a mapping's EIDs: a plain locator (one hop, the
// RLOC) or an Explicit Locator Path (its hops in order, the last one the
// ETR's RLOC). A path's index in Entry.Paths is its path ID, written into
// the data header for the RTRs (docs/routers.md).
type Path struct {
	Hops     []Hop
	Priority uint8 // lower is preferred; 255: not to be used (RFC 9301)
	Weight   uint8 // share among paths of the same priority
	Up       bool  // reachable, as far as the control plane knows
}

// Entry is a map-cache entry.
type Entry struct {
	Action Action
	Paths  []Path // at most MaxPaths, in the order of the Map-Reply
}

// Miss is an EID the data plane had packets for and no entry.
type Miss struct {
	InstanceID uint32
	EID        netip.Addr
}

// Subflow is an MPTCP subflow the ITR bound to a path, seen from the
// side of this router's site (Local is the host behind it).
type Subflow struct {
	InstanceID    uint32
	Local, Remote netip.AddrPort
	Connection    uint64 // subflows of one MPTCP connection share it
	Path          int    // index into the entry's paths
	Initiator     bool   // the local host opened the subflow
	Closing       bool   // a FIN was seen
	Asked         bool   // its path is being asked for (stateful binding)
	Pinned        bool   // on the path its destination's ETR chose
	Packets       uint64 // encapsulated on Path
	Bytes         uint64
	LastSeen      time.Time
}

// MaxPaths and MaxHops bound what an entry holds in the BPF maps.
const (
	MaxPaths = 8
	MaxHops  = 8
)
