package daemon

import (
	"net/netip"
	"sync/atomic"

	"github.com/amptcp/amptcp/lisp"
)

// handle passes a datagram to the role that takes its message type.
// Malformed and unexpected datagrams are counted, not logged: a flood of
// them must cost little and say nothing at the default level.
func (d *Daemon) handle(w *worker, pkt []byte, from netip.AddrPort) {
	if len(pkt) == 0 {
		d.counter.malformed.Add(1)
		return
	}
	t := lisp.MsgType(pkt[0] >> 4)
	d.counter.received[t].Add(1)
	switch {
	case t == lisp.TypeMapRegister && d.ms != nil:
		d.ms.HandleRegister(pkt, from, &w.out)
	case t == lisp.TypeECM && d.mr != nil:
		if err := w.ecm.DecodeFromBytes(pkt); err != nil {
			d.counter.malformed.Add(1)
			d.log.Debug("malformed ECM", "from", from, "error", err)
			return
		}
		d.mr.HandleECM(pkt, &w.ecm, from, &w.out)
	default:
		d.counter.unexpected[t].Add(1)
	}
}

type counters struct {
	received   [16]atomic.Uint64 // by message type
	unexpected [16]atomic.Uint64 // types no role here takes
	malformed  atomic.Uint64
	oversized  atomic.Uint64
	sent       atomic.Uint64
	sendErrors atomic.Uint64
	unroutable atomic.Uint64 // answers to a family with no socket
}
