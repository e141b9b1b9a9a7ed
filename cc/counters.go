package cc

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Counters are a congestion control's counters (enum amp_counter),
// summed over CPUs.
type Counters struct {
	// Acks counts the ACKs that grew a window (cong_avoid), CoupledAcks
	// those of subflows coupled with their connection.
	Acks, CoupledAcks uint64
	// Losses counts window reductions: losses, timeouts, ECN.
	Losses uint64
	// ConnsCreated and ConnsDeleted count the connections' entries in
	// the map, created by their first subflow and deleted by the last:
	// with Swept, the difference is the connections coupled now.
	ConnsCreated, ConnsDeleted uint64
	// MapFull and SlotsFull count subflows left uncoupled: the map had
	// no room for one more connection, or the connection for one more
	// subflow.
	MapFull, SlotsFull uint64
	// Subflows and Plain count the sockets that started with the
	// control: MPTCP subflows, and plain TCP sockets (which it runs as
	// its single-path base, Reno or Vegas).
	Subflows, Plain uint64
	// Early counts sockets whose first callback came before init: a SYN
	// that timed out, which calls ssthresh.
	Early uint64
	// Swept counts entries removed because none of their subflows ran a
	// callback for 10 s: connections idle that long, or gone without the
	// kernel calling release on their subflows (it misses about one in a
	// hundred).
	Swept uint64
	// Insane counts windows and thresholds brought back because they
	// were far above any this control set (see docs/cc.md, "Kernel
	// quirks").
	Insane uint64
}

// readCounters sums the per-CPU counters of m.
func readCounters(m *ebpf.Map) (Counters, error) {
	var c Counters
	dst := []*uint64{&c.Acks, &c.Losses, &c.CoupledAcks, &c.ConnsCreated, &c.ConnsDeleted, &c.MapFull, &c.SlotsFull, &c.Subflows, &c.Plain, &c.Early, &c.Swept, &c.Insane}
	var per []uint64
	for i, p := range dst {
		if uint32(i) >= m.MaxEntries() {
			break // an older version, with fewer counters
		}
		if err := m.Lookup(uint32(i), &per); err != nil {
			return Counters{}, fmt.Errorf("cc: read counter %d: %w", i, err)
		}
		for _, v := range per {
			*p += v
		}
	}
	return c, nil
}
