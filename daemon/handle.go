package daemon

import (
	"net/netip"
	"sync/atomic"

	"github.com/amptcp/amptcp/lisp"
)

// handle passes a datagram to the role that takes its message type.
// Malformed and unexpected datagrams are counted, not logged: a flood of
// them must cost little and say nothing at the default level.
//
// With the tunnel roles, one lispd may also be a map-server and
// map-resolver. An ECM then goes to the map-resolver, unless a map-server
// forwarded it to the ETR (the E bit): that is a Map-Request for the
// xtr's own EIDs, which it registered without asking for proxy replies.
func (d *Daemon) handle(w *worker, pkt []byte, from netip.AddrPort) {
	if len(pkt) == 0 {
		w.counter.malformed.Add(1)
		return
	}
	t := lisp.MsgType(pkt[0] >> 4)
	w.counter.received[t].Add(1)
	switch {
	case t == lisp.TypeMapRegister && d.ms != nil:
		d.ms.HandleRegister(pkt, from, &w.out)
	case t == lisp.TypeMapNotifyAck && d.ms != nil:
		d.ms.HandleNotifyAck(pkt, from)
	case t == lisp.TypeECM && (d.mr != nil || d.tun != nil || d.ddt != nil):
		if err := w.ecm.DecodeFromBytes(pkt); err != nil {
			w.counter.malformed.Add(1)
			d.log.Debug("malformed ECM", "from", from, "error", err)
			return
		}
		if w.ecm.DDT && !w.ecm.ToETR {
			d.handleDDT(w, pkt, from)
			return
		}
		if d.mr == nil && d.tun == nil {
			d.counter.unexpected[t].Add(1)
			return
		}
		if d.tun == nil || (d.mr != nil && !w.ecm.ToETR) {
			d.mr.HandleECM(pkt, &w.ecm, from, &w.out)
			return
		}
		req, ok := w.ecm.Message.(*lisp.MapRequest)
		if !ok {
			w.counter.unexpected[t].Add(1)
			return
		}
		d.tun.xtr.HandleRequest(req, w.ecm.Source.Port(), from, &w.out)
	case t == lisp.TypeMapRequest && d.tun != nil:
		if err := w.req.DecodeFromBytes(pkt); err != nil {
			w.counter.malformed.Add(1)
			d.log.Debug("malformed Map-Request", "from", from, "error", err)
			return
		}
		if w.req.SMR {
			d.tun.cache.HandleSMR(&w.req, from)
			return
		}
		d.tun.xtr.HandleRequest(&w.req, from.Port(), from, &w.out) // probes, and requests sent directly
	case t == lisp.TypeMapReply && d.tun != nil:
		if err := w.reply.DecodeFromBytes(pkt); err != nil {
			w.counter.malformed.Add(1)
			d.log.Debug("malformed Map-Reply", "from", from, "error", err)
			return
		}
		if w.reply.Probe && d.tun.prober != nil {
			d.tun.prober.HandleReply(&w.reply, from)
			return
		}
		d.tun.cache.HandleReply(&w.reply, from)
	case t == lisp.TypeMapReferral && d.mr != nil && d.mr.HasDDT():
		d.mr.HandleReferral(pkt, from, &w.out) // counts the malformed ones
	case t == lisp.TypeMapNotify && d.tun != nil:
		d.tun.xtr.HandleNotify(pkt, from, &w.out) // counts the malformed ones
	default:
		w.counter.unexpected[t].Add(1)
	}
}

// handleDDT answers a DDT Map-Request (an ECM with the D bit) as DDT
// node or DDT map-server. A lispd that is neither does not take it: a
// map-resolver resolving it as an ITR's request could loop with another.
func (d *Daemon) handleDDT(w *worker, pkt []byte, from netip.AddrPort) {
	if d.ddt == nil {
		d.counter.unexpected[lisp.TypeECM].Add(1)
		return
	}
	d.ddt.HandleECM(pkt, &w.ecm, from, &w.out)
}

type counters struct {
	datagrams  atomic.Uint64     // received, of any type
	received   [16]atomic.Uint64 // by message type
	unexpected [16]atomic.Uint64 // types no role here takes
	malformed  atomic.Uint64
	oversized  atomic.Uint64
	sent       atomic.Uint64
	sendErrors atomic.Uint64
	unroutable atomic.Uint64 // answers to a family with no socket
}
