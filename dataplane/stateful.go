package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
)

// Stateful binding ([LISP-TE] §IV.A, mptcp-subflows bind-stateful): the
// ITR reports each MPTCP subflow it binds for the first time, the
// control plane asks the destination's ETR which path it is to take, and
// pins it there; the subflow's packets go on the path bound meanwhile, so
// that its SYN is not held while the ETR is asked.

// Flow names a subflow as the subflow table keys it: seen from this
// router's site, Local the host behind it.
type Flow struct {
	InstanceID    uint32
	Local, Remote netip.AddrPort
}

func (f Flow) String() string { return f.Local.String() + "<>" + f.Remote.String() }

// SubflowEvent is a subflow the ITR bound for the first time, whose path
// the destination's ETR is to choose.
type SubflowEvent struct {
	Flow       Flow
	Connection uint64
	Path       int  // the path it was bound to meanwhile
	Initiator  bool // the local host opened it (else this is its first answer)
}

// NoPin is the path that tells a subflow whose path was asked for that
// none comes: it stays where it is.
const NoPin = -1

// SubflowEvents delivers the subflows to ask the paths of, with
// mptcp-subflows bind-stateful. It is closed by Close.
func (d *Dataplane) SubflowEvents() <-chan SubflowEvent { return d.events }

// Pin moves the subflow of f to path (an index into its destination's
// map-cache entry) from its next packet on, if that path is usable then;
// NoPin leaves it where it is. A subflow not asked about ignores it.
func (d *Dataplane) Pin(f Flow, path int) error {
	if path != NoPin && (path < 0 || path >= MaxPaths) {
		return fmt.Errorf("dataplane: pin %s: no path %d", f, path)
	}
	k, err := flowKey(f)
	if err != nil {
		return err
	}
	v := uint32(noPath)
	if path != NoPin {
		v = uint32(path)
	}
	if err := d.objs.SubflowPins.Update(&k, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: pin %s: %w", f, err)
	}
	return nil
}

// Subflow looks the subflow of f up in the subflow table.
func (d *Dataplane) Subflow(f Flow) (Subflow, bool, error) {
	k, err := flowKey(f)
	if err != nil {
		return Subflow{}, false, err
	}
	var v lispSubflow
	if err := d.objs.Subflows.Lookup(&k, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return Subflow{}, false, nil
		}
		return Subflow{}, false, fmt.Errorf("dataplane: look %s up: %w", f, err)
	}
	return subflowOf(&k, &v, monotonic(), time.Now()), true, nil
}

// flowKey lays f out as the subflow table's key.
func flowKey(f Flow) (lispFlowKey, error) {
	l, r := f.Local.Addr().Unmap(), f.Remote.Addr().Unmap()
	if !l.IsValid() || !r.IsValid() || l.Is4() != r.Is4() {
		return lispFlowKey{}, fmt.Errorf("dataplane: %s is no flow of one address family", f)
	}
	k := lispFlowKey{Iid: f.InstanceID, Family: family(l), Lport: htons(f.Local.Port()), Rport: htons(f.Remote.Port())}
	k.Local.A, k.Remote.A = addrWords(l).A, addrWords(r).A
	return k, nil
}

// htons stores a port in network order.
func htons(p uint16) uint16 { return ntohs(p) }

// Offsets of struct subflow_event (bpf/common.h asserts them).
const (
	eventConn = 48
	eventPath = 56
	eventSize = 64
)

// decodeEvent reads a struct subflow_event from the ring buffer.
func decodeEvent(b []byte) (SubflowEvent, bool) {
	if len(b) < eventSize {
		return SubflowEvent{}, false
	}
	var k lispFlowKey
	k.Iid = binary.NativeEndian.Uint32(b)
	k.Family = b[4]
	k.Lport = binary.NativeEndian.Uint16(b[6:])
	k.Rport = binary.NativeEndian.Uint16(b[8:])
	for i := range 4 {
		k.Local.A[i] = binary.NativeEndian.Uint32(b[12+4*i:])
		k.Remote.A[i] = binary.NativeEndian.Uint32(b[28+4*i:])
	}
	if k.Family != afInet && k.Family != afInet6 {
		return SubflowEvent{}, false
	}
	ev := SubflowEvent{
		Flow: Flow{
			InstanceID: k.Iid,
			Local:      netip.AddrPortFrom(wordsAddr(k.Family, addr{A: k.Local.A}), ntohs(k.Lport)),
			Remote:     netip.AddrPortFrom(wordsAddr(k.Family, addr{A: k.Remote.A}), ntohs(k.Rport)),
		},
		Connection: binary.NativeEndian.Uint64(b[eventConn:]),
		Path:       int(b[eventPath]),
		Initiator:  b[eventPath+1]&sfInitiator != 0,
	}
	return ev, true
}

// readEvents passes the ring buffer's subflows on, dropping them when
// the control plane lags: such a subflow stays on the path it has.
func (d *Dataplane) readEvents() { readRing(d, "subflow events", d.eventReader, decodeEvent, d.events) }
