package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Counters are the data plane's packet counters by name, summed over
// CPUs: the programs' outcomes by reason (counterNames) and, per path
// index, what the ITR sent and the RTR forwarded on it
// ("itr_path0_packets", "rtr_path1_bytes", ...).
type Counters map[string]uint64

// counterNames are enum counter of bpf/common.h, in its order.
var counterNames = []string{
	"itr_encapsulated", "itr_natively_forwarded", "itr_miss_dropped", "itr_miss_natively_forwarded",
	"itr_miss_reported", "itr_miss_lost", "itr_action_dropped", "itr_no_path", "itr_no_route",
	"itr_no_source", "itr_source_by_port_sum", "itr_too_big", "itr_mss_clamped", "itr_encapsulation_failed", "itr_not_ip", "itr_link_local",
	"etr_decapsulated", "etr_malformed", "etr_fragment", "etr_decapsulation_failed",
	"rtr_reencapsulated", "rtr_miss", "rtr_no_route", "rtr_ttl_expired", "rtr_family_change",
	"rtr_ambiguous",
	"subflow_new", "subflow_join", "subflow_join_unknown_token", "subflow_bound", "subflow_rebound",
	"subflow_reset", "subflow_fin", "subflow_tokens_learned",
	"itr_ttl_expired", "etr_decapsulated_xdp", "itr_held", "itr_released", "rtr_held", "rtr_released",
	"subflow_asked", "subflow_ask_lost", "subflow_pinned", "subflow_pin_refused", "rtr_unresolved",
	"itr_encapsulated_gpe", "rtr_reencapsulated_gpe", "etr_not_ip", "gro_device_dropped",
}

// Counters reads the packet counters.
func (d *Dataplane) Counters() (Counters, error) {
	c := Counters{}
	var per []uint64
	for i, name := range counterNames {
		if err := d.objs.Counters.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("dataplane: read counter %s: %w", name, err)
		}
		c[name] = sum(per)
	}
	for _, m := range []struct {
		name string
		m    *ebpf.Map
	}{{"itr", d.objs.ItrPaths}, {"rtr", d.objs.RtrPaths}} {
		var stats []lispPathStats
		for i := range MaxPaths {
			if err := m.m.Lookup(uint32(i), &stats); err != nil {
				return nil, fmt.Errorf("dataplane: read %s path counters: %w", m.name, err)
			}
			var pkts, bytes uint64
			for _, s := range stats {
				pkts += s.Packets
				bytes += s.Bytes
			}
			c[fmt.Sprintf("%s_path%d_packets", m.name, i)] = pkts
			c[fmt.Sprintf("%s_path%d_bytes", m.name, i)] = bytes
		}
	}
	if d.hold != nil {
		c["itr_held_lost"] = d.hold.lost.Load()
	}
	if d.holdRTR != nil {
		c["rtr_held_lost"] = d.holdRTR.lost.Load()
	}
	return c, nil
}

func sum(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}

// Subflows lists the MPTCP subflows the data plane tracks.
func (d *Dataplane) Subflows() ([]Subflow, error) {
	now, wall := monotonic(), time.Now()
	var (
		k   lispFlowKey
		v   lispSubflow
		out []Subflow
	)
	it := d.objs.Subflows.Iterate()
	for it.Next(&k, &v) {
		out = append(out, subflowOf(&k, &v, now, wall))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("dataplane: list subflows: %w", err)
	}
	return out, nil
}

func subflowOf(k *lispFlowKey, v *lispSubflow, now uint64, wall time.Time) Subflow {
	s := Subflow{
		InstanceID: k.Iid,
		Local:      netip.AddrPortFrom(wordsAddr(k.Family, k.Local), ntohs(k.Lport)),
		Remote:     netip.AddrPortFrom(wordsAddr(k.Family, k.Remote), ntohs(k.Rport)),
		Connection: v.Conn,
		Path:       int(v.Path),
		Initiator:  v.Flags&sfInitiator != 0,
		Closing:    v.Flags&sfClosing != 0,
		Asked:      v.Flags&sfAsked != 0,
		Pinned:     v.Flags&sfPinned != 0,
		Packets:    v.Packets,
		Bytes:      v.Bytes,
		LastSeen:   wall.Add(-time.Duration(now - min(v.LastNs, now))),
	}
	if v.Path == noPath {
		s.Path = -1
	}
	return s
}

const (
	sfInitiator = 1
	sfClosing   = 2
	sfPinned    = 8
	sfAsked     = 16
	noPath      = 0xff
	// closingLinger is how long a subflow that sent a FIN keeps its path
	// for the last ACKs before it is forgotten.
	closingLinger = 30 * time.Second
)

// monotonic is the clock of bpf_ktime_get_ns, and of
// bpf_ktime_get_coarse_ns, which is up to a tick behind.
func monotonic() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// sweepEvery forgets idle and closed subflows until Close, and moves
// the subflow hints on to a new epoch once per idle timeout.
func (d *Dataplane) sweepEvery(idle time.Duration) {
	t := time.NewTicker(min(max(idle/4, 100*time.Millisecond), 10*time.Second))
	defer t.Stop()
	epochStart := monotonic()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			now := monotonic()
			n, err := d.sweep(now, idle)
			if err != nil {
				d.log.Warn("sweep subflows", "error", err)
				continue
			}
			if n > 0 {
				d.log.Debug("subflows ended", "count", n)
			}
			if time.Duration(now-epochStart) < idle {
				continue
			}
			if err := d.nextEpoch(); err != nil {
				d.log.Warn("subflow hints", "error", err)
				continue
			}
			epochStart = monotonic()
		}
	}
}

// nextEpoch moves the subflow hints on to a new epoch. The programs skip
// the subflow table for packets whose hint is older than the epoch
// before (with an epoch to spare; bpf/maps.h). That is right when the
// epoch moves on only right after a sweep and at least idle after it
// last moved: each subflow left then was seen within idle, so after the
// last move.
func (d *Dataplane) nextEpoch() error {
	var epoch uint32
	if err := d.objs.SubflowEpoch.Get(&epoch); err != nil {
		return err
	}
	return d.objs.SubflowEpoch.Set(epoch + 1)
}

// sweep removes the subflows idle at now for longer than idle, or
// closing for longer than closingLinger, and gives their paths back to
// their connections. It returns how many it removed.
func (d *Dataplane) sweep(now uint64, idle time.Duration) (int, error) {
	var (
		k    lispFlowKey
		v    lispSubflow
		gone []lispFlowKey
		vals []lispSubflow
	)
	it := d.objs.Subflows.Iterate()
	for it.Next(&k, &v) {
		age := time.Duration(now - min(v.LastNs, now))
		if age > idle || (v.Flags&sfClosing != 0 && age > closingLinger) {
			gone, vals = append(gone, k), append(vals, v)
		}
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for i := range gone {
		if err := d.objs.Subflows.Delete(&gone[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return i, err
		}
		d.release(vals[i].Conn, vals[i].Path)
	}
	return len(gone), nil
}

// release takes a removed subflow off its connection's path count, and
// forgets the connection (and its tokens) with its last subflow.
func (d *Dataplane) release(conn uint64, path uint8) {
	var c lispConn
	if err := d.objs.Conns.Lookup(conn, &c); err != nil {
		return
	}
	if path < MaxPaths && c.OnPath[path] > 0 {
		c.OnPath[path]--
	}
	if sum32(c.OnPath[:]) > 0 {
		d.objs.Conns.Update(conn, &c, ebpf.UpdateExist)
		return
	}
	d.objs.Conns.Delete(conn)
	var (
		tok uint32
		id  uint64
		old []uint32
	)
	it := d.objs.Tokens.Iterate()
	for it.Next(&tok, &id) {
		if id == conn {
			old = append(old, tok)
		}
	}
	for _, t := range old {
		d.objs.Tokens.Delete(t)
	}
}

// ntohs reads a port stored in network order.
func ntohs(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}

func sum32(v []uint32) uint32 {
	var s uint32
	for _, x := range v {
		s += x
	}
	return s
}
