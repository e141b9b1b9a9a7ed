package pce

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// node is a router of the overlay: an xTR, where ELPs start and end, or
// an RTR, which they go through.
type node struct {
	name       string
	role       string // "xtr" or "rtr"
	addrs      []netip.Addr
	metrics    string
	configured bool
	eids       []mapping.EID // an xTR's registered prefixes

	// Its row of the RTT matrix, as last read.
	rows     map[netip.Addr]Row
	read     time.Time // when it was last read
	failures int       // reads failed in a row
	err      string
}

func (n *node) transit() bool { return n.role == "rtr" }

// learn takes the xTRs from the map-server's registrations: one node per
// ETR (its xTR-ID, else its address), named after its site (and its
// address when the site has several), with the RLOCs its locators end
// at and the address it registers from. A configured node that has one
// of those addresses is that xTR. xTRs whose registrations expired go.
func (e *Engine) learn() {
	if e.regs == nil {
		return
	}
	regs := e.regs()
	now := e.now()
	type learnt struct {
		site   string
		source netip.AddrPort
		addrs  []netip.Addr
		eids   []mapping.EID
	}
	byID := map[string]*learnt{}
	var order []string
	perSite := map[string]map[string]bool{}
	for _, r := range regs {
		id := r.Source.Addr().String()
		if r.XTRID != nil {
			id = fmt.Sprintf("xtr-id %x %d", r.XTRID.ID, r.XTRID.SiteID)
		}
		l := byID[id]
		if l == nil {
			l = &learnt{site: r.Site, source: r.Source, addrs: []netip.Addr{r.Source.Addr().Unmap()}}
			byID[id] = l
			order = append(order, id)
			if perSite[r.Site] == nil {
				perSite[r.Site] = map[string]bool{}
			}
			perSite[r.Site][id] = true
		}
		l.eids = append(l.eids, r.EID)
		for _, a := range r.RLOCs {
			if !slices.Contains(l.addrs, a) {
				l.addrs = append(l.addrs, a)
			}
		}
	}
	slices.Sort(order)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.learnt = now
	seen := map[string]bool{}
	for _, id := range order {
		l := byID[id]
		n := e.configuredOwner(l.addrs)
		if n == nil {
			name := l.site
			if len(perSite[l.site]) > 1 {
				name = l.site + "@" + l.source.Addr().String()
			}
			if n = e.nodes[name]; n == nil || n.configured {
				n = &node{name: name}
				e.nodes[name] = n
			}
			n.role, n.addrs = "xtr", l.addrs
			n.metrics = config.MetricsURL(l.source.Addr().Unmap(), e.cfg.MetricsPort)
		}
		n.eids = l.eids
		seen[n.name] = true
	}
	for name, n := range e.nodes {
		switch {
		case !n.configured && !seen[name]:
			delete(e.nodes, name)
		case n.configured && !seen[name]:
			n.eids = nil
		}
	}
	e.index()
	e.adoptUnknown(now)
}

// configuredOwner is the configured node that has one of addrs.
func (e *Engine) configuredOwner(addrs []netip.Addr) *node {
	for _, a := range addrs {
		if n := e.byAddr[a]; n != nil && n.configured {
			return n
		}
	}
	return nil
}

// index builds the look-ups by address and by EID-prefix. The caller
// holds the lock (or owns the engine).
func (e *Engine) index() {
	clear(e.byAddr)
	clear(e.byEID)
	e.iids = e.iids[:0]
	e.sites = mapping.NewTable[*node]()
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		for _, a := range n.addrs {
			if e.byAddr[a] == nil || n.configured {
				e.byAddr[a] = n
			}
		}
		for _, eid := range n.eids {
			e.byEID[eid] = n
			e.sites.Insert(eid, n)
			if !slices.Contains(e.iids, eid.IID) {
				e.iids = append(e.iids, eid.IID)
			}
		}
	}
}

// requester identifies who sent a Map-Request, in values that outlive
// the request (decoded requests are reused): its source EID, its
// ITR-RLOCs and the address it came from.
type requester struct {
	srcIID uint32
	srcEID netip.Addr // invalid when the request gives none
	itrs   []netip.Addr
	from   netip.Addr
}

func requesterOf(req *lisp.MapRequest, from netip.AddrPort) requester {
	r := requester{from: from.Addr().Unmap()}
	if iid, eid, ok := control.EIDOf(req.SourceEID); ok {
		r.srcIID, r.srcEID = iid, eid.Unmap()
	}
	for _, a := range req.ITRRLOCs {
		r.itrs = append(r.itrs, a.IP().Unmap())
	}
	return r
}

// node is the node a request comes from: the site of its source EID
// when it gives one, else the node that has one of its ITR-RLOCs, else
// the site whose prefix holds one (a host asking for itself, as
// `amptcp pm` does), else the node it came from; nil when the role knows
// none of them. The caller holds the lock.
func (e *Engine) node(r requester) *node {
	if r.srcEID.IsValid() {
		if n, found := e.sites.Lookup(r.srcIID, r.srcEID); found {
			return n
		}
	}
	for _, a := range r.itrs {
		if n := e.byAddr[a]; n != nil {
			return n
		}
	}
	for _, a := range r.itrs {
		if n := e.siteOf(a); n != nil {
			return n
		}
	}
	return e.byAddr[r.from]
}

// siteOf is the xTR of the registered prefix that holds a, in any
// instance.
func (e *Engine) siteOf(a netip.Addr) *node {
	if !a.IsValid() {
		return nil
	}
	for _, iid := range e.iids {
		if n, ok := e.sites.Lookup(iid, a); ok {
			return n
		}
	}
	return nil
}

// nodeNames is a path's node names joined for logs and keys.
func nodeNames(names []string) string { return strings.Join(names, " > ") }
