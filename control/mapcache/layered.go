package mapcache

import (
	"fmt"
	"slices"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/mapping"
)

// Multi-layer paths and the hop bits of RFC 8060's ELP. A hop with the L
// bit is an EID, not an RLOC: the router looks it up and puts in its
// place the path its mapping gives (draft-ietf-lisp-te, "Using
// Recursion"; [LISP-TE] §IV.A's multi-layer signalling): an RLOC, or the
// hops of an ELP, an intra-domain path through an inter-domain one. Every
// router on the path expands it alike, so that each finds itself and its
// neighbours in it, and a path ID keeps naming the same path. A hop
// probing finds down takes its path down; with elp-bits as-sent, only
// hops with the P bit are probed, and a hop without the S bit is gone
// around instead.

// maxDepth is how many layers of Lookup hops a path may have: an EID
// whose mapping holds EIDs, which are looked up once more.
const maxDepth = 2

// layout is a path as the data plane takes it.
type layout struct {
	// hops are the path's hops with Lookup hops expanded and the
	// non-strict hops probing finds down left out; while the path
	// cannot be expanded, its own hops (the data plane does not forward
	// to a Lookup hop).
	hops []dataplane.Hop
	// probed are the hops whose reachability decides about the path:
	// those of the expansion that probing asks about, skipped ones too
	// (so that they are seen coming back).
	probed []dataplane.Hop
	up     bool
	// why says what keeps the path down besides its R bit and probing:
	// an EID being looked up, a loop, too many hops.
	why string
}

// layout expands p, a path of an entry of instance iid. The caller
// holds the lock.
func (c *Cache) layout(iid uint32, p path) layout {
	hops, why := c.expand(iid, p.hops, 0)
	if why != "" {
		c.counter.unexpanded.Add(1)
		l := layout{hops: p.hops, why: why}
		for _, h := range p.hops {
			if c.probed(h, len(p.hops)) {
				l.probed = append(l.probed, h)
			}
		}
		return l
	}
	l := layout{up: p.reachable}
	for i, h := range hops {
		probed := c.probed(h, len(hops))
		if probed {
			l.probed = append(l.probed, h)
		}
		if !probed || c.reachable(h.Addr) {
			l.hops = append(l.hops, h)
			continue
		}
		// The last hop is the ETR: a path cannot go around it.
		if h.Strict || !c.bits || i == len(hops)-1 {
			l.up = false
			l.hops = append(l.hops, h)
		}
	}
	return l
}

// expand replaces the Lookup hops of hops by their mappings' paths,
// depth layers down, and checks the result: at most MaxHops hops, of one
// family, and no RLOC twice (a loop, draft-ietf-lisp-te "Packet Loop
// Avoidance"). It says why when it cannot: then an EID not in the
// map-cache is asked for (from Tick). The caller holds the lock.
func (c *Cache) expand(iid uint32, hops []dataplane.Hop, depth int) ([]dataplane.Hop, string) {
	out := make([]dataplane.Hop, 0, len(hops))
	for _, h := range hops {
		if !h.Lookup {
			out = append(out, h)
			continue
		}
		if depth >= maxDepth {
			return nil, fmt.Sprintf("%s: more than %d layers of EIDs", h.Addr, maxDepth)
		}
		sub, why := c.lookupHop(iid, h, depth+1)
		if why != "" {
			return nil, why
		}
		out = append(out, sub...)
	}
	if len(out) > dataplane.MaxHops {
		return nil, fmt.Sprintf("%d hops expanded: at most %d fit", len(out), dataplane.MaxHops)
	}
	for i, h := range out {
		if slices.ContainsFunc(out[:i], func(o dataplane.Hop) bool { return o.Addr == h.Addr }) {
			c.counter.loops.Add(1)
			return nil, fmt.Sprintf("a loop: %s twice", h.Addr)
		}
		if h.Addr.Is4() != out[0].Addr.Is4() {
			return nil, "the expansion mixes address families"
		}
	}
	return out, ""
}

// lookupHop is the path a Lookup hop stands for: of the paths of the
// map-cache entry of its EID that are up, the first of the best
// priority, so that every router picks the same. A plain RLOC is probed
// and as strict as the hop; an ELP's hops keep their bits. The caller
// holds the lock.
func (c *Cache) lookupHop(iid uint32, h dataplane.Hop, depth int) ([]dataplane.Hop, string) {
	e, ok := c.entries.Lookup(iid, h.Addr)
	if !ok {
		c.wanted[mapping.HostEID(iid, h.Addr)] = true
		return nil, fmt.Sprintf("%s is being looked up", h.Addr)
	}
	if e.action != dataplane.Encapsulate || len(e.paths) == 0 {
		return nil, fmt.Sprintf("%s maps to no locator (%s)", h.Addr, e.action)
	}
	var (
		best    []dataplane.Hop
		bestPri = 256
		why     = fmt.Sprintf("no path of %s is up", h.Addr)
	)
	for _, p := range e.paths {
		if !p.reachable || int(p.priority) >= bestPri || p.priority == 255 {
			continue
		}
		sub, w := c.expand(iid, p.hops, depth)
		if w != "" {
			why = w
			continue
		}
		if !c.strictUp(sub) {
			continue
		}
		if len(sub) == 1 && !p.hops[0].Lookup {
			sub = []dataplane.Hop{{Addr: sub[0].Addr, Probe: true, Strict: h.Strict}}
		}
		best, bestPri = sub, int(p.priority)
	}
	if best == nil {
		return nil, why
	}
	return best, ""
}

// strictUp says whether no hop that must be used is found down.
func (c *Cache) strictUp(hops []dataplane.Hop) bool {
	for i, h := range hops {
		if (h.Strict || !c.bits || i == len(hops)-1) && c.probed(h, len(hops)) && !c.reachable(h.Addr) {
			return false
		}
	}
	return true
}

// probed says whether probing decides about a hop of a path of n hops:
// a plain RLOC always; a hop of an ELP unless it is an EID to look up,
// and with elp-bits as-sent only if it has the P bit.
func (c *Cache) probed(h dataplane.Hop, n int) bool {
	switch {
	case h.Lookup:
		return false
	case n == 1 || !c.bits:
		return true
	}
	return h.Probe
}

// relayer installs again the entries with Lookup hops whose expansion
// changed: the mapping of an EID they name came, changed or went. The
// caller holds the lock.
func (c *Cache) relayer() {
	for e := range c.layered {
		if !c.changed(e) {
			continue
		}
		if err := c.fwd.Put(keyOf(e.key), c.dataplaneEntry(e)); err != nil {
			c.counter.putErrors.Add(1)
			c.log.Warn("data plane refused a map-cache entry", "eid", e.key, "error", err)
			continue
		}
		c.counter.reexpanded.Add(1)
	}
}

// askWanted asks for the EIDs of Lookup hops that are not in the
// map-cache, and again for those of bindings whose ELP their entry
// lacks. The caller holds the lock.
func (c *Cache) askWanted() []datagram {
	var out []datagram
	now := c.now()
	for eid := range c.wanted {
		delete(c.wanted, eid)
		again := c.refetch[eid]
		delete(c.refetch, eid)
		if _, ok := c.entries.Lookup(eid.IID, eid.Prefix.Addr()); ok && !again {
			continue
		}
		if dg, ok := c.request(&request{eid: eid, replace: again}, now); ok {
			out = append(out, dg)
		}
	}
	return out
}

func hasLookup(e *entry) bool {
	for _, p := range e.paths {
		if slices.ContainsFunc(p.hops, func(h dataplane.Hop) bool { return h.Lookup }) {
			return true
		}
	}
	return false
}
