package lisp

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// ELP is LCAF type 10 (RFC 8060, draft-ietf-lisp-te): an Explicit
// Locator Path, the re-encapsulating tunnel routers a packet visits in
// order on its way to the last hop.
//
//	|           AFI = 16387         |     Rsvd1     |     Flags     |
//	|   Type = 10   |     Rsvd2     |             Length            |
//	|           Rsvd3         |L|P|S|           AFI = x             |
//	|                         Reencap Hop 1  ...                    |
//	|           Rsvd3         |L|P|S|           AFI = x             |
//	|                         Reencap Hop k  ...                    |
type ELP struct {
	Hops []ELPHop
}

// ELPHop is one re-encapsulation point of an ELP.
type ELPHop struct {
	Address Address
	// Lookup (L): the hop is an EID to look up in the mapping system, not
	// an RLOC to encapsulate to.
	Lookup bool
	// RLOCProbe (P): the ITR and RTRs probe this hop for reachability.
	RLOCProbe bool
	// Strict (S): the hop must be used; packets are dropped rather than
	// forwarded around it when it is unreachable.
	Strict bool
}

const (
	elpLookup uint16 = 1 << 2
	elpProbe  uint16 = 1 << 1
	elpStrict uint16 = 1 << 0
)

func (h ELPHop) flags() uint16 {
	var f uint16
	if h.Lookup {
		f |= elpLookup
	}
	if h.RLOCProbe {
		f |= elpProbe
	}
	if h.Strict {
		f |= elpStrict
	}
	return f
}

func (h ELPHop) String() string {
	var bits []string
	for _, f := range []struct {
		set  bool
		name string
	}{{h.Lookup, "L"}, {h.RLOCProbe, "P"}, {h.Strict, "S"}} {
		if f.set {
			bits = append(bits, f.name)
		}
	}
	if len(bits) == 0 {
		return h.Address.String()
	}
	return h.Address.String() + "(" + strings.Join(bits, ",") + ")"
}

func (l *ELP) Type() LCAFType                    { return LCAFELP }
func (l *ELP) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }

func (l *ELP) bodyLen(depth int) int {
	n := 0
	for _, h := range l.Hops {
		n += 2 + addressLen(h.Address, depth)
	}
	return n
}

func (l *ELP) appendBody(b []byte, depth int) (_ []byte, err error) {
	for _, h := range l.Hops {
		b = binary.BigEndian.AppendUint16(b, h.flags())
		if b, err = appendAddress(b, h.Address, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *ELP) String() string {
	hops := make([]string, len(l.Hops))
	for i, h := range l.Hops {
		hops[i] = h.String()
	}
	return "elp{" + strings.Join(hops, " -> ") + "}"
}

// PathOf returns the ELP that a locator's address names, in any of the
// forms deployed software sends: a bare ELP LCAF, or an ELP inside an AFI
// List (lispers.net sends a path as an AFI List of AFI 0, or of an
// address, and the ELP). It returns nil when the address names no ELP.
func PathOf(a Address) *ELP {
	switch l := a.LCAF().(type) {
	case *ELP:
		return l
	case *AFIList:
		for _, in := range l.Addresses {
			if elp, ok := in.LCAF().(*ELP); ok {
				return elp
			}
		}
	}
	return nil
}

// ipv4HopLen is the size of the usual ELP hop, flags and an IPv4 RLOC:
// the capacity it gives is exact for such paths and never too large.
const ipv4HopLen = 8

// elpBlock holds a short ELP and its hops: decoding a mapping with several
// paths is mostly allocation.
type elpBlock struct {
	elp  ELP
	hops [4]ELPHop
}

func (r *reader) newELP(hops int) *ELP {
	if hops > len(elpBlock{}.hops) {
		return &ELP{Hops: make([]ELPHop, 0, hops)}
	}
	b := fromSlab(&r.elps)
	b.elp.Hops = b.hops[:0]
	return &b.elp
}

func (r *reader) elp() LCAF {
	l := r.newELP(r.remaining() / ipv4HopLen)
	for i := 0; r.remaining() > 0; i++ {
		f := r.u16("hop flags")
		l.Hops = grow(l.Hops)
		h := &l.Hops[i]
		h.Lookup = f&elpLookup != 0
		h.RLOCProbe = f&elpProbe != 0
		h.Strict = f&elpStrict != 0
		r.address(&h.Address)
		if r.err != nil {
			r.prefix("hops[%d].", i)
			return nil
		}
	}
	return l
}

// ReplicationList is LCAF type 13 (RFC 8060): the RTRs and ETRs a
// multicast packet is replicated to, each at a level of the replication
// tree.
//
//	|   Type = 13   |     Rsvd2     |             Length            |
//	|              Rsvd3            |     Rsvd4     |  Level Value  |
//	|              AFI = x          |           RTR/ETR #1 ...      |
//	|              Rsvd3            |     Rsvd4     |  Level Value  |
//	|              AFI = x          |           RTR/ETR  #n ...     |
type ReplicationList struct {
	Entries []RLEEntry
}

// RLEEntry is one replication target.
type RLEEntry struct {
	Level   uint8
	Address Address
}

func (l *ReplicationList) Type() LCAFType                    { return LCAFReplicationList }
func (l *ReplicationList) headerBits() (uint8, uint8, uint8) { return 0, 0, 0 }

func (l *ReplicationList) bodyLen(depth int) int {
	n := 0
	for _, e := range l.Entries {
		n += 4 + addressLen(e.Address, depth)
	}
	return n
}

func (l *ReplicationList) appendBody(b []byte, depth int) (_ []byte, err error) {
	for _, e := range l.Entries {
		b = append(b, 0, 0, 0, e.Level)
		if b, err = appendAddress(b, e.Address, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *ReplicationList) String() string {
	s := make([]string, len(l.Entries))
	for i, e := range l.Entries {
		s[i] = fmt.Sprintf("%s(level %d)", e.Address, e.Level)
	}
	return "rle{" + strings.Join(s, ", ") + "}"
}

func (r *reader) replicationList() LCAF {
	l := &ReplicationList{Entries: make([]RLEEntry, 0, r.remaining()/10)} // IPv4 entries
	for i := 0; r.remaining() > 0; i++ {
		r.take(3, "reserved")
		l.Entries = grow(l.Entries)
		e := &l.Entries[i]
		e.Level = r.u8("level")
		r.address(&e.Address)
		if r.err != nil {
			r.prefix("entries[%d].", i)
			return nil
		}
	}
	return l
}
