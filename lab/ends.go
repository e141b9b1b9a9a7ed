package lab

import (
	"net/netip"

	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
)

// ends are the two hosts of a flow, or of a measurement of its path,
// each on one of its links: a multi-homed host's address is the one on
// that link ("" for its first link's).
type ends struct {
	from, fromLink, to, toLink string
}

// flowEnds are the ends of a planned flow; for the direction of its
// data (reversed for a download) with data.
func flowEnds(p scenario.Planned, data bool) ends {
	e := ends{p.From, p.FromLink, p.To, p.ToLink}
	if data && p.Direction == "download" {
		e = ends{p.To, p.ToLink, p.From, p.FromLink}
	}
	return e
}

// String is "client>server", with the links when they are chosen:
// "ude>hu via dfn, cnunicom".
func (e ends) String() string {
	s := e.from + ">" + e.to
	if e.fromLink != "" || e.toLink != "" {
		s += " (" + orFirst(e.fromLink) + ", " + orFirst(e.toLink) + ")"
	}
	return s
}

func orFirst(link string) string {
	if link == "" {
		return "first link"
	}
	return link
}

// hostAddr is a node's address on a link, its first link's for "".
func hostAddr(plan *topo.Plan, node, link string) netip.Addr {
	n := plan.Node(node)
	if link != "" {
		if i := n.Interface(link); i != nil {
			return i.Address.Addr()
		}
	}
	return n.Interfaces[0].Address.Addr()
}

// server is the address and port a client dials.
func (e ends) server(plan *topo.Plan, port int) string {
	return netip.AddrPortFrom(hostAddr(plan, e.to, e.toLink), uint16(port)).String()
}

// client is the client's source address, none (any) unless a link is
// chosen.
func (e ends) client(plan *topo.Plan) netip.Addr {
	if e.fromLink == "" {
		return netip.Addr{}
	}
	return hostAddr(plan, e.from, e.fromLink)
}
