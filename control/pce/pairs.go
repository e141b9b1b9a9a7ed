package pce

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
	"github.com/amptcp/amptcp/te"
)

// pairKey is a (source, destination) pair of xTRs, by node name.
type pairKey struct{ src, dst string }

// pair is the set of ELPs of one pair.
type pair struct {
	key        pairKey
	configured bool // computed whether asked or not
	tracker    *te.Tracker
	set        []elp // the set in use, cheapest first when adopted
	slots      []int // the slot of each ELP of set in its destination
	lastAsked  time.Time
	computed   time.Time
	excluded   []string // why candidates were left out, last time
	note       string   // why the last computation changed nothing, if it says
}

// elp is a path of a set: its nodes from the source, the ELP's hops (the
// addresses each node probes the next at) and its RTT when chosen.
type elp struct {
	nodes []string
	hops  []netip.Addr
	rtt   float64 // seconds
}

// key names the ELP by its hops: the same hops are the same ELP, in the
// same slot, whichever source uses it.
func (p elp) key() string {
	var b strings.Builder
	for i, h := range p.hops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(h.String())
	}
	return b.String()
}

// dest is a destination xTR: the ELPs of its slots, the routers that
// asked for its prefixes, which get an SMR when the slots change, and its
// prefixes whose requests are forwarded to it (with their registered
// records), whose sets it is sent (push.go).
type dest struct {
	slots     te.Slots[elp]
	askers    map[asker]time.Time
	forwarded map[mapping.EID]lisp.MapRecord
	pushed    map[mapping.EID]pushed
}

// pushed is what a prefix's ETR was last sent, and when.
type pushed struct {
	digest string
	at     time.Time
}

type asker struct {
	addr netip.Addr
	eid  mapping.EID
}

func (e *Engine) dest(name string) *dest {
	d := e.dests[name]
	if d == nil {
		d = &dest{
			slots:     te.Slots[elp]{Max: config.MaxPaths, Linger: e.cfg.TTL.Duration + time.Minute},
			askers:    map[asker]time.Time{},
			forwarded: map[mapping.EID]lisp.MapRecord{},
			pushed:    map[mapping.EID]pushed{},
		}
		e.dests[name] = d
	}
	return d
}

// request is the computation of one pair's set on a snapshot.
func (e *Engine) request(s *snapshot, p *pair) (te.Request, bool) {
	src, ok1 := s.index[p.key.src]
	dst, ok2 := s.index[p.key.dst]
	if !ok1 || !ok2 {
		return te.Request{}, false
	}
	// No cost bound on the candidates: the status tells why each of the
	// K was left out.
	q := te.Query{From: int(src), To: int(dst), K: e.cfg.K, MaxHops: e.cfg.MaxHops}
	if direct, ok := s.g.Find(int(src), int(dst)); ok && !e.cfg.Direct {
		q.Avoid = []int{direct}
	}
	rules := e.rules
	rules.Capacity = e.capacity(s)
	r := te.Request{Query: q, Rules: rules}
	if e.cfg.Disjoint {
		r.Taken = e.taken(s, p)
	}
	return r, true
}

// taken are the ELPs the other sources use towards p's destination, as
// paths of s, for link-disjoint sets. The caller holds the lock.
func (e *Engine) taken(s *snapshot, p *pair) []te.Path {
	var out []te.Path
	for _, o := range e.pairs {
		if o == p || o.key.dst != p.key.dst {
			continue
		}
		for _, l := range o.set {
			if path, ok := s.path(l.nodes); ok {
				out = append(out, path)
			}
		}
	}
	return out
}

// path is an ELP's nodes as a path of s, if all its links are still there.
func (s *snapshot) path(names []string) (te.Path, bool) {
	var p te.Path
	for i, name := range names {
		v, ok := s.index[name]
		if !ok {
			return te.Path{}, false
		}
		p.Nodes = append(p.Nodes, v)
		if i > 0 {
			ed, ok := s.edge(names[i-1], name)
			if !ok {
				return te.Path{}, false
			}
			_, _, w := s.g.Edge(ed)
			p.Edges = append(p.Edges, int32(ed))
			p.Cost += w
		}
	}
	return p, true
}

// capacity is rule 2's bottleneck of a path from the configured link
// capacities, 0 when one of its links has none.
func (e *Engine) capacity(s *snapshot) func(te.Path) float64 {
	caps := e.cfg.HeadOfLine.Capacities
	if len(caps) == 0 {
		return nil
	}
	return func(p te.Path) float64 {
		least := math.Inf(1)
		for i := 1; i < len(p.Nodes); i++ {
			u, v := s.nodes[p.Nodes[i-1]], s.nodes[p.Nodes[i]]
			known := 0.0
			for _, c := range caps { // the last that matches wins
				if (c.From == u || c.From == "*") && (c.To == v || c.To == "*") {
					known, _ = config.ParseRate(c.Rate) // validated
				}
			}
			if known == 0 {
				return 0
			}
			least = min(least, known)
		}
		return least
	}
}

// elpOf turns a path of s into an ELP.
func (s *snapshot) elpOf(p te.Path) elp {
	l := elp{rtt: p.Cost}
	for _, v := range p.Nodes {
		l.nodes = append(l.nodes, s.nodes[v])
	}
	for _, ed := range p.Edges {
		l.hops = append(l.hops, s.hop[ed])
	}
	return l
}

// Refresh computes the sets of the pairs that only selects (all when nil)
// on the latest graph, and adopts those the hysteresis lets through.
func (e *Engine) Refresh(only func(*pair) bool) {
	e.mu.Lock()
	s := e.snap
	var reqs []te.Request
	var which []*pair
	for _, p := range e.pairs {
		if only != nil && !only(p) {
			continue
		}
		if r, ok := e.request(s, p); ok {
			reqs = append(reqs, r)
			which = append(which, p)
		}
	}
	e.mu.Unlock()
	if len(reqs) == 0 {
		return
	}
	results := te.Compute(s.g, reqs, e.workers)
	e.counter.computations.Add(uint64(len(results)))
	var smrs []asker
	e.mu.Lock()
	now := e.now()
	for i, p := range which {
		if e.pairs[p.key] == p {
			smrs = append(smrs, e.evaluate(now, s, p, results[i])...)
		}
	}
	// The ETRs that answer for themselves get the sets before the
	// routers are solicited to ask them again.
	pushes, more := e.pushAll(now)
	e.mu.Unlock()
	e.push(pushes)
	e.solicit(append(smrs, more...))
}

// evaluate weighs a pair's new set against the one in use and installs
// it if the hysteresis says so. It returns the routers to solicit. The
// caller holds the lock.
func (e *Engine) evaluate(now time.Time, s *snapshot, p *pair, res te.Result) []asker {
	p.computed = now
	p.excluded = p.excluded[:0]
	for _, x := range res.Excluded {
		p.excluded = append(p.excluded, nodeNames(s.elpOf(x.Path).nodes)+": "+x.Reason)
	}
	cand := make([]elp, len(res.Paths))
	for i, path := range res.Paths {
		cand[i] = s.elpOf(path)
	}
	if e.cfg.Disjoint { // the others' sets may have changed since the request
		for _, x := range cand {
			if q, ok := e.conflicting(s, p, x); ok {
				p.note = fmt.Sprintf("%s conflicts with %s, in use", nodeNames(x.nodes), nodeNames(q))
				return nil
			}
		}
	}
	if !e.fits(p, cand) {
		p.note = "no free path slot at the destination"
		e.counter.slotsFull.Add(1)
		return nil
	}
	p.note = ""
	cur := e.current(s, p, res)
	v := p.tracker.Evaluate(now, cur, te.ScoreOf(res.Choice), sameSet(p.set, cand))
	if !v.Adopt {
		return nil
	}
	e.counter.changes.Add(1)
	e.log.Info("ELP set changed", "source", p.key.src, "destination", p.key.dst, "elps", len(cand), "reason", v.Reason)
	return e.install(now, p, cand)
}

// current scores the set in use on the latest graph: gone when one of
// its links is, not fitting when one of its paths breaks rule 1 against
// the best path there is now.
func (e *Engine) current(s *snapshot, p *pair, res te.Result) te.Current {
	var cur te.Current
	cur.Fits = true
	c := te.Choice{}
	for _, l := range p.set {
		path, ok := s.path(l.nodes)
		if !ok {
			cur.Gone, cur.Why = true, e.goneWhy(s, l)
			return cur
		}
		c.Paths = append(c.Paths, path)
	}
	best := math.Inf(1)
	for _, path := range append(slices.Clone(c.Paths), res.Candidates...) {
		best = min(best, path.Cost)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, path := range c.Paths {
		lo, hi = min(lo, path.Cost), max(hi, path.Cost)
		cur.Total += path.Cost
		if bound := ruleOne(best, e.rules); path.Cost > bound {
			cur.Fits = false
			cur.Why = fmt.Sprintf("%s has an RTT of %.1f ms, beyond %.1f ms", nodeNames(e.namesOf(s, path)), path.Cost*1000, bound*1000)
		}
	}
	cur.Paths = len(c.Paths)
	if cur.Paths > 0 {
		cur.Spread = hi - lo
	}
	return cur
}

// ruleOne is rule 1's bound given the best RTT.
func ruleOne(best float64, r te.Rules) float64 {
	b := math.Inf(1)
	if r.Factor >= 1 {
		b = r.Factor * best
	}
	if r.Spread > 0 {
		b = min(b, best+r.Spread)
	}
	return b * (1 + 1e-9)
}

func (e *Engine) namesOf(s *snapshot, p te.Path) []string {
	out := make([]string, len(p.Nodes))
	for i, v := range p.Nodes {
		out[i] = s.nodes[v]
	}
	return out
}

// goneWhy says which link of an ELP is missing from the graph.
func (e *Engine) goneWhy(s *snapshot, l elp) string {
	for i := 1; i < len(l.nodes); i++ {
		if _, ok := s.edge(l.nodes[i-1], l.nodes[i]); !ok {
			return fmt.Sprintf("%s no longer reaches %s (%s)", l.nodes[i-1], l.nodes[i], l.hops[i-1])
		}
	}
	return "a node of " + nodeNames(l.nodes) + " is gone"
}

// conflicting says whether x shares a first hop or a link with an ELP
// another source uses towards the same destination.
func (e *Engine) conflicting(s *snapshot, p *pair, x elp) ([]string, bool) {
	xp, ok := s.path(x.nodes)
	if !ok {
		return nil, false
	}
	for _, o := range e.pairs {
		if o == p || o.key.dst != p.key.dst {
			continue
		}
		for _, l := range o.set {
			if op, ok := s.path(l.nodes); ok && te.Conflict(xp, op) {
				return l.nodes, true
			}
		}
	}
	return nil, false
}

// fits says whether the destination has slots for the ELPs of cand it
// holds in none: free ones, retired ones whose ELP lingered long enough,
// room at the end. (Slots p releases linger: they are no room yet.)
func (e *Engine) fits(p *pair, cand []elp) bool {
	d := e.dest(p.key.dst)
	now := e.now()
	slots := d.slots.All()
	room := d.slots.Max - len(slots)
	for _, sl := range slots {
		if sl.Key == "" || (sl.Users == 0 && now.Sub(sl.Retired) >= d.slots.Linger) {
			room++
		}
	}
	for _, x := range cand {
		if !slices.ContainsFunc(slots, func(sl te.Slot[elp]) bool { return sl.Key == x.key() }) {
			room--
		}
	}
	return room >= 0
}

// install makes cand the set of p: its ELPs take their slots, those it
// no longer uses are released. It returns the routers to solicit when
// the destination's slots changed. The caller holds the lock.
func (e *Engine) install(now time.Time, p *pair, cand []elp) []asker {
	d := e.dest(p.key.dst)
	before := slotKeys(d)
	old := p.slots
	p.set, p.slots = cand, make([]int, 0, len(cand))
	for _, x := range cand {
		i, err := d.slots.Acquire(now, x.key(), x)
		if err != nil { // fits said there is room
			e.log.Error("no path slot", "destination", p.key.dst, "elp", x.key())
			continue
		}
		p.slots = append(p.slots, i)
	}
	for _, i := range old {
		d.slots.Release(now, i)
	}
	if slices.Equal(before, slotKeys(d)) {
		return nil
	}
	return e.askersOf(d)
}

func slotKeys(d *dest) []string {
	var out []string
	for _, sl := range d.slots.All() {
		out = append(out, sl.Key)
	}
	return out
}

func (e *Engine) askersOf(d *dest) []asker {
	out := make([]asker, 0, len(d.askers))
	for a := range d.askers {
		out = append(out, a)
	}
	return out
}

func sameSet(a, b []elp) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y elp) bool { return y.key() == x.key() }) {
			return false
		}
	}
	return true
}

// touched are the pairs whose set in use the latest graph changes: a
// link of it gone, or an RTT of it moved by a quarter since it was
// computed. The caller holds the lock.
func (e *Engine) touched() map[pairKey]bool {
	out := map[pairKey]bool{}
	for k, p := range e.pairs {
		if len(p.set) == 0 {
			if p.configured || !p.lastAsked.IsZero() {
				out[k] = true // no set yet: try again
			}
			continue
		}
		for _, l := range p.set {
			path, ok := e.snap.path(l.nodes)
			if !ok || math.Abs(path.Cost-l.rtt) > l.rtt/4 {
				out[k] = true
			}
		}
	}
	return out
}

// expire forgets the pairs no one asked about for three TTLs, and the
// slots and askers of their destinations that linger no more. The caller
// holds the lock.
func (e *Engine) expire(now time.Time) {
	idle := 3 * e.cfg.TTL.Duration
	for k, p := range e.pairs {
		if p.configured || now.Sub(p.lastAsked) < idle {
			continue
		}
		d := e.dest(k.dst)
		for _, i := range p.slots {
			d.slots.Release(now, i)
		}
		delete(e.pairs, k)
		e.log.Info("pair idle, forgotten", "source", k.src, "destination", k.dst)
	}
	for name, d := range e.dests {
		d.slots.Sweep(now)
		for a, seen := range d.askers {
			if now.Sub(seen) > idle {
				delete(d.askers, a)
			}
		}
		if d.slots.Len() == 0 && len(d.askers) == 0 && len(d.forwarded) == 0 {
			delete(e.dests, name)
		}
	}
}

// solicit sends an SMR to each router that asked for a prefix whose
// mapping changed, once, so that it asks again now rather than at the
// end of its TTL: a new slot must be known at every RTR before an ITR
// sends on it.
func (e *Engine) solicit(to []asker) {
	if len(to) == 0 || e.send == nil {
		return
	}
	rlocs := e.localRLOCs()
	slices.SortFunc(to, func(a, b asker) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		return compareEIDs(a.eid, b.eid)
	})
	for _, a := range slices.Compact(to) {
		b, err := control.EncodeSMR(a.eid, 0, netip.Addr{}, rlocs, a.addr)
		if err != nil {
			e.log.Debug("cannot build SMR", "eid", a.eid, "to", a.addr, "error", err)
			continue
		}
		if err := e.send.Send(netip.AddrPortFrom(a.addr, control.Port), b); err != nil {
			e.log.Debug("send SMR", "to", a.addr, "error", err)
			continue
		}
		e.counter.smrs.Add(1)
	}
}
