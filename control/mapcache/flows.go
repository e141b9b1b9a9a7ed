package mapcache

import (
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Stateful binding, the ITR's half ([LISP-TE] §IV.A, steps 3 to 7 and
// 9): for each new MPTCP subflow the data plane reports, a Map-Request
// whose EID is the subflow (an Application Data LCAF of its ports around
// the destination EID, control.FlowAddress) goes through the
// map-resolvers to the destination's ETR, which chooses the subflow's
// ELP and answers with it alone. The ITR finds that ELP among the paths
// of the destination's entry, where a path ID names it for the RTRs, and
// pins the subflow to it. The subflow's packets take the path the data
// plane bound it to meanwhile: its SYN is not held.

// Pinner moves a subflow to a path of its destination's entry: the data
// plane.
type Pinner interface {
	Pin(f dataplane.Flow, path int) error
}

// pinWait is how long a binding waits for its ELP to appear in the
// destination's entry (asked for again) before the subflow is left where
// it is.
const pinWait = 5 * time.Second

// pendingPin is a binding whose ELP the destination's entry does not
// hold (yet): the entry is asked for again, and the subflow pinned when
// it comes.
type pendingPin struct {
	eid     mapping.EID // the destination, a host EID
	hops    []dataplane.Hop
	expires time.Time
}

// Subflow asks the destination's ETR for the path of a subflow the data
// plane bound for the first time. A request for it already in flight is
// not repeated.
func (c *Cache) Subflow(ev dataplane.SubflowEvent) {
	c.counter.flowEvents.Add(1)
	if c.pin == nil {
		return
	}
	dst := ev.Flow.Remote.Addr().Unmap()
	f := control.Flow{IID: ev.Flow.InstanceID, Protocol: syscall.IPPROTO_TCP, Source: ev.Flow.Local, Dest: ev.Flow.Remote}
	r := &request{eid: mapping.HostEID(ev.Flow.InstanceID, dst), flow: &f, dpFlow: ev.Flow}
	now := c.now()
	c.mu.Lock()
	var (
		dg datagram
		ok bool
	)
	switch {
	case c.flows[ev.Flow] != nil:
		c.counter.deduplicated.Add(1)
	case len(c.pending)+len(c.flows) >= maxPending:
		c.counter.overload.Add(1)
		c.pinTo(ev.Flow, dataplane.NoPin)
	default:
		if dg, ok = c.try(r, now); ok {
			c.flows[ev.Flow] = r
			c.counter.flowRequests.Add(1)
		}
	}
	c.mu.Unlock()
	if ok {
		c.transmit([]datagram{dg})
	}
}

// flowReply takes the Map-Reply to a stateful request r: a record of
// r's flow binds the subflow to its first usable locator; a record of a
// prefix (an ETR that does not bind, or a map-server that answers for
// it) is installed as any other, and the subflow stays where the data
// plane put it. The caller holds the lock.
func (c *Cache) flowReply(r *request, reply *lisp.MapReply, src netip.AddrPort, now time.Time) {
	for i := range reply.Records {
		rec := &reply.Records[i]
		if !r.flow.Is(rec.EID) {
			_, reason := c.install(rec, r, src, now)
			c.counter.records[reason].Add(1)
			continue
		}
		if hops, ok := c.bound(rec); ok {
			c.bind(r, hops, now)
			return
		}
	}
	c.counter.flowUnbound.Add(1)
	c.pinTo(r.dpFlow, dataplane.NoPin)
}

// bound reads the path of a binding's record: its first usable locator
// of the best priority.
func (c *Cache) bound(rec *lisp.MapRecord) ([]dataplane.Hop, bool) {
	paths, _ := pathsOf(rec.Locators, c.localRLOCs())
	best := -1
	for i, p := range paths {
		if p.reachable && p.priority < 255 && (best < 0 || p.priority < paths[best].priority) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return paths[best].hops, true
}

// bind pins r's subflow to the path of its destination's entry that has
// hops, or, when the entry has none such (it predates the binding, or
// is not there), asks for the entry again and pins when it comes. The
// caller holds the lock.
func (c *Cache) bind(r *request, hops []dataplane.Hop, now time.Time) {
	if i, ok := c.pathIndex(r.eid, hops); ok {
		c.pinTo(r.dpFlow, i)
		c.counter.flowPinned.Add(1)
		return
	}
	c.pins[r.dpFlow] = &pendingPin{eid: r.eid, hops: hops, expires: now.Add(pinWait)}
	c.wanted[r.eid] = true // asked from Tick, whether an entry is there or not
	c.refetch[r.eid] = true
}

// pathIndex finds the path of the entry covering eid whose hops are
// hops, by address: its index, which the path ID carries.
func (c *Cache) pathIndex(eid mapping.EID, hops []dataplane.Hop) (int, bool) {
	e, ok := c.entries.Lookup(eid.IID, eid.Prefix.Addr())
	if !ok {
		return 0, false
	}
	for i, p := range e.paths {
		if slices.EqualFunc(p.hops, hops, func(a, b dataplane.Hop) bool { return a.Addr == b.Addr }) {
			return i, true
		}
	}
	return 0, false
}

// repin pins the subflows waiting for an ELP of e, now installed. The
// caller holds the lock.
func (c *Cache) repin(e *entry) {
	for f, p := range c.pins {
		if !e.key.Prefix.Contains(p.eid.Prefix.Addr()) || e.key.IID != p.eid.IID {
			continue
		}
		if i, ok := c.pathIndex(p.eid, p.hops); ok {
			delete(c.pins, f)
			c.pinTo(f, i)
			c.counter.flowPinned.Add(1)
		}
	}
}

// expirePins gives up on bindings whose ELP did not come. The caller
// holds the lock.
func (c *Cache) expirePins(now time.Time) {
	for f, p := range c.pins {
		if now.After(p.expires) {
			delete(c.pins, f)
			c.counter.flowUnbound.Add(1)
			c.pinTo(f, dataplane.NoPin)
		}
	}
}

// pinTo tells the data plane. The caller holds the lock.
func (c *Cache) pinTo(f dataplane.Flow, path int) {
	if err := c.pin.Pin(f, path); err != nil {
		c.counter.putErrors.Add(1)
		c.log.Warn("data plane refused a subflow's path", "flow", f, "path", path, "error", err)
	}
}
