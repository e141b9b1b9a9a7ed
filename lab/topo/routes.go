package topo

import "net/netip"

// routes gives hosts a default route through the neighbour of their first
// link (their site's xTR, or a router), and a host with several links a
// source route per address (what it sends from an address leaves by that
// address's link), and every other node a route to
// each subnet of the underlay it is not on, through the neighbour on a
// shortest path (fewest links; the first link in the file's order wins a
// tie). EID subnets stay inside their sites for the xTRs: only a site's
// own xTR has them, as connected routes, so that traffic between sites
// is encapsulated or dropped. The nodes outside sites (routers, RTRs,
// map-servers) have a route to each site's EID prefix towards its xTR:
// what the mapping system sends to a host natively, the Map-Replies to
// the Map-Requests of an `amptcp pm` (their ITR-RLOC is the host's EID),
// must reach it. Hosts carry nothing for others.
func (c *compiler) routes() {
	p := c.plan
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.Role != RoleHost || len(n.Interfaces) == 0 {
			continue
		}
		first := n.Interfaces[0]
		via := p.Node(first.Peer).Interface(first.Link).Address.Addr()
		n.Routes = append(n.Routes, Route{Via: via, Dev: first.Name})
		if len(n.Interfaces) < 2 {
			continue
		}
		for j, iface := range n.Interfaces {
			n.SourceRoutes = append(n.SourceRoutes, SourceRoute{From: iface.Address.Addr(), Table: sourceTable + j,
				Via: p.Node(iface.Peer).Interface(iface.Link).Address.Addr(), Dev: iface.Name})
		}
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.Role == RoleHost {
			continue
		}
		hop := c.firstHops(n.Name)
		for _, l := range p.Links {
			if c.eid[l.Name] {
				continue
			}
			if l.A.Node == n.Name || l.B.Node == n.Name {
				continue // connected
			}
			// The nearer end of the subnet that forwards (a host's end
			// is reached through its router).
			best, bestDist := "", -1
			for _, e := range []string{l.A.Node, l.B.Node} {
				if p.Node(e).Role == RoleHost {
					continue
				}
				if h, ok := hop[e]; ok && (bestDist < 0 || h.dist < bestDist) {
					best, bestDist = e, h.dist
				}
			}
			if best == "" {
				continue // not reachable: the underlay is split
			}
			h := hop[best]
			n.Routes = append(n.Routes, Route{Dst: l.A.Address.Masked(), Via: h.via, Dev: h.dev})
		}
		if n.Role == RoleXTR {
			continue
		}
		for _, s := range p.Sites {
			if h, ok := hop[s.XTR]; ok && s.XTR != "" && s.XTR != n.Name {
				n.Routes = append(n.Routes, Route{Dst: s.EIDPrefix, Via: h.via, Dev: h.dev})
			}
		}
	}
}

// hopInfo is how a node reaches another: the gateway and interface of
// the first link of a shortest path, and its length in links.
type hopInfo struct {
	via  netip.Addr
	dev  string
	dist int
}

// firstHops runs a breadth-first search from node over the links between
// forwarding nodes (not EID links), in the file's order of links.
func (c *compiler) firstHops(from string) map[string]hopInfo {
	p := c.plan
	out := map[string]hopInfo{from: {}}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		nd := p.Node(cur)
		for _, iface := range nd.Interfaces {
			if c.eid[iface.Link] {
				continue
			}
			peer := p.Node(iface.Peer)
			if peer.Role == RoleHost {
				continue
			}
			if _, seen := out[peer.Name]; seen {
				continue
			}
			h := out[cur]
			h.dist++
			if cur == from {
				h.via, h.dev = peer.Interface(iface.Link).Address.Addr(), iface.Name
			}
			out[peer.Name] = h
			queue = append(queue, peer.Name)
		}
	}
	return out
}
