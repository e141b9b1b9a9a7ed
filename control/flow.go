package control

import (
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// Flow is a transport flow, as a stateful Map-Request asks for its path
// ([LISP-TE] §III.A): the ITR of the source host asks the ETR of the
// destination which ELP this one flow (an MPTCP subflow) is to take.
type Flow struct {
	IID      uint32
	Protocol uint8
	// Source is the source host and port (the Map-Request's source EID),
	// Dest the destination EID and port.
	Source, Dest netip.AddrPort
}

// FlowAddress is the EID of a stateful Map-Request's record: the
// destination EID in an Application Data LCAF (RFC 8060 type 4) whose
// local port is the source's and remote port the destination's, each a
// range of one, inside an Instance-ID LCAF when iid is not 0, as
// mapping.EID.Wire nests it. The TOS is left 0: a subflow's path does not
// depend on it.
func FlowAddress(f Flow) lisp.Address {
	a := lisp.LCAFAddress(&lisp.AppData{
		Protocol:    f.Protocol,
		LocalPorts:  lisp.PortRange{Low: f.Source.Port(), High: f.Source.Port()},
		RemotePorts: lisp.PortRange{Low: f.Dest.Port(), High: f.Dest.Port()},
		Address:     lisp.IPAddress(f.Dest.Addr()),
	})
	if f.IID != 0 {
		a = lisp.LCAFAddress(&lisp.InstanceID{IID: f.IID, Address: a})
	}
	return a
}

// FlowOf reads the flow of a stateful Map-Request: its record's EID (an
// Application Data LCAF with one port each side, in an Instance-ID LCAF
// or holding one) and its source EID, the source host. It says false
// for any other request.
func FlowOf(eid, source lisp.Address) (Flow, bool) {
	iid, app, dst, ok := unwrap(eid)
	if !ok || app == nil || app.LocalPorts.Low != app.LocalPorts.High || app.RemotePorts.Low != app.RemotePorts.High {
		return Flow{}, false
	}
	_, src, ok := EIDOf(source)
	if !ok || src.Unmap().Is4() != dst.Unmap().Is4() {
		return Flow{}, false
	}
	return Flow{
		IID: iid, Protocol: app.Protocol,
		Source: netip.AddrPortFrom(src.Unmap(), app.LocalPorts.Low),
		Dest:   netip.AddrPortFrom(dst.Unmap(), app.RemotePorts.Low),
	}, true
}

// unwrap reads an EID as Map-Requests carry it: an IP address, in an
// Instance-ID LCAF, an Application Data LCAF, or both, nested either
// way, each at most once.
func unwrap(a lisp.Address) (iid uint32, app *lisp.AppData, ip netip.Addr, ok bool) {
	seenIID := false
	for range 3 {
		switch l := a.LCAF().(type) {
		case *lisp.InstanceID:
			if seenIID {
				return 0, nil, netip.Addr{}, false
			}
			seenIID, iid, a = true, l.IID, l.Address
			continue
		case *lisp.AppData:
			if app != nil {
				return 0, nil, netip.Addr{}, false
			}
			app, a = l, l.Address
			continue
		}
		break
	}
	ip = a.IP()
	return iid, app, ip, ip.IsValid()
}

// Is says whether a is f's EID (FlowAddress), nested either way: the EID
// of the record that answers a stateful Map-Request.
func (f Flow) Is(a lisp.Address) bool {
	iid, app, ip, ok := unwrap(a)
	return ok && app != nil && iid == f.IID && ip.Unmap() == f.Dest.Addr() && app.Protocol == f.Protocol &&
		app.LocalPorts == lisp.PortRange{Low: f.Source.Port(), High: f.Source.Port()} &&
		app.RemotePorts == lisp.PortRange{Low: f.Dest.Port(), High: f.Dest.Port()}
}

// HostEID is the flow's destination, the EID a plain Map-Request asks.
func (f Flow) HostEID() (uint32, netip.Addr) { return f.IID, f.Dest.Addr() }

func (f Flow) String() string {
	return f.Source.String() + ">" + f.Dest.String()
}
