package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"structs"
)

// The C side's constants (bpf/common.h).
const (
	afInet     = 2
	afInet6    = 10
	noSelf     = 0xff
	fastRLOCs  = 8
	fastEgress = 8
	gpeFirst   = 1
	gpeNext    = 2
)

// addr is the C struct addr as bpf2go generates it.
type addr = struct {
	_ structs.HostLayout
	A [4]uint32
}

// addrWords lays an address out as the programs read it: the bytes in
// network order, IPv4 in the first word.
func addrWords(a netip.Addr) addr {
	var w addr
	b := a.AsSlice()
	for i := 0; i < len(b)/4; i++ {
		w.A[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// wordsAddr is addrWords' inverse.
func wordsAddr(fam uint8, w addr) netip.Addr {
	var b [16]byte
	for i, v := range w.A {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	if fam == afInet {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return afInet
	}
	return afInet6
}

// be32 is v as a word whose bytes in memory are v in network order.
func be32(v uint32) uint32 {
	return binary.NativeEndian.Uint32(binary.BigEndian.AppendUint32(nil, v))
}

func key4(k Key) *lispMcKey4 {
	return &lispMcKey4{Prefixlen: 32 + uint32(k.Prefix.Bits()), Iid: be32(k.InstanceID), Addr: addrWords(k.Prefix.Addr()).A[0]}
}

func key6(k Key) *lispMcKey6 {
	return &lispMcKey6{Prefixlen: 32 + uint32(k.Prefix.Bits()), Iid: be32(k.InstanceID), Addr: addrWords(k.Prefix.Addr()).A}
}

// entry lays a map-cache entry out for the programs, with what each
// path's hops mean for this router precomputed: where the ITR sends
// (the first hop) and, when one of our RLOCs is on the path, the hops
// around it, which the RTR sends to and recognises senders by.
func (d *Dataplane) entry(e Entry) (*lispMcEntry, error) {
	if len(e.Paths) > MaxPaths {
		return nil, fmt.Errorf("%d paths: at most %d fit", len(e.Paths), MaxPaths)
	}
	v := &lispMcEntry{Action: uint8(e.Action), N_paths: uint8(len(e.Paths))}
	for i, p := range e.Paths {
		if len(p.Hops) == 0 || len(p.Hops) > MaxHops {
			return nil, fmt.Errorf("path %d has %d hops: want 1 to %d", i, len(p.Hops), MaxHops)
		}
		// A Lookup hop is an EID the control plane has not expanded
		// yet (of the EIDs' family, maybe): no address to send to.
		at := slices.IndexFunc(p.Hops, func(h Hop) bool { return !h.Lookup })
		fam := family(p.Hops[max(at, 0)].Addr.Unmap())
		for _, h := range p.Hops {
			if !h.Addr.IsValid() || (!h.Lookup && family(h.Addr.Unmap()) != fam) {
				return nil, fmt.Errorf("path %d mixes address families: its hops are %v", i, hops(p))
			}
		}
		vp := &v.Paths[i]
		vp.Family, vp.Priority, vp.Weight, vp.Up = fam, p.Priority, p.Weight, flag(p.Up)
		vp.N_hops = uint8(len(p.Hops))
		vp.First = addrWords(p.Hops[0].Addr.Unmap())
		vp.Self = noSelf
		for j, h := range p.Hops {
			if h.Lookup || !slices.Contains(d.rlocs, h.Addr.Unmap()) {
				continue
			}
			vp.Self = uint8(j)
			if j > 0 && !p.Hops[j-1].Lookup {
				vp.Prev = addrWords(p.Hops[j-1].Addr.Unmap())
			}
			// Left zero before a Lookup hop: the RTR drops what it
			// cannot send on yet.
			if j+1 < len(p.Hops) && !p.Hops[j+1].Lookup {
				vp.Next = addrWords(p.Hops[j+1].Addr.Unmap())
			}
			break
		}
		vp.Gpe = gpeFlags(d.gpePeers, p, vp.Self)
	}
	return v, nil
}

func hops(p Path) []netip.Addr {
	a := make([]netip.Addr, len(p.Hops))
	for i, h := range p.Hops {
		a[i] = h.Addr
	}
	return a
}

// decodeMiss reads a struct miss from the ring buffer.
func decodeMiss(b []byte) (Miss, bool) {
	var m lispMiss
	if len(b) < 24 {
		return Miss{}, false
	}
	m.Iid = binary.NativeEndian.Uint32(b)
	m.Family = b[4]
	for i := range m.Eid.A {
		m.Eid.A[i] = binary.NativeEndian.Uint32(b[8+4*i:])
	}
	if m.Family != afInet && m.Family != afInet6 {
		return Miss{}, false
	}
	return Miss{InstanceID: m.Iid, EID: wordsAddr(m.Family, m.Eid)}, true
}
