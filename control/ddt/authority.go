package ddt

import (
	"net/netip"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
)

// Authority answers the DDT Map-Requests that reach one lispd: its
// map-server those for the EIDs it is authoritative for, its DDT node
// the others. Either may be nil, not both.
type Authority struct {
	Node      *Node
	MapServer *MapServer
}

// HandleECM answers the DDT Map-Request ecm (decoded from raw) that
// arrived from src.
func (a *Authority) HandleECM(raw []byte, ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox) {
	if a.MapServer != nil && (a.Node == nil || a.mapServerAnswers(ecm)) {
		a.MapServer.HandleECM(raw, ecm, src, out)
		return
	}
	a.Node.HandleECM(ecm, src, out)
}

// mapServerAnswers reports whether the first EID asked is the
// map-server's.
func (a *Authority) mapServerAnswers(ecm *lisp.ECM) bool {
	req, ok := ecm.Message.(*lisp.MapRequest)
	if !ok || len(req.Records) == 0 {
		return false
	}
	iid, ip, ok := askedEID(req.Records[0])
	return ok && a.MapServer.Authoritative(iid, ip)
}

// Counters sums the counters of the node and the map-server.
func (a *Authority) Counters() Counters {
	var c Counters
	if a.Node != nil {
		c = c.Add(a.Node.Counters())
	}
	if a.MapServer != nil {
		c = c.Add(a.MapServer.Counters())
	}
	return c
}
