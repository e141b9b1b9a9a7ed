package pce

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

type counters struct {
	scrapes, scrapeErrors     atomic.Uint64
	computations, changes     atomic.Uint64
	answersMasked, answersAll atomic.Uint64
	smrs, slotsFull, pushes   atomic.Uint64
}

// Status is what `lispd status` shows of the te role: the nodes, the RTT
// matrix, every pair's set with its age and why it last changed, and
// each destination's path slots.
type Status struct {
	Nodes        []NodeStatus `json:"nodes"`
	Matrix       []Link       `json:"matrix"`
	Pairs        []PairStatus `json:"pairs"`
	Destinations []DestStatus `json:"destinations"`
	// Graph is when the graph was last built, and its size.
	Graph    time.Time `json:"graph_built"`
	Vertices int       `json:"vertices"`
	Edges    int       `json:"edges"`
}

// NodeStatus is a router of the overlay.
type NodeStatus struct {
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	RLOCs      []string  `json:"rlocs"`
	EIDs       []string  `json:"eid_prefixes,omitempty"`
	Configured bool      `json:"configured"`
	Metrics    string    `json:"metrics"`
	Read       time.Time `json:"read,omitzero"`
	Error      string    `json:"error,omitempty"`
}

// Link is one entry of the RTT matrix: what From measures of the
// address To is reached at.
// RTT is the smoothed RTT, MinRTT the least of the last half minute,
// which the graph weighs the link by, in milliseconds.
type Link struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	Address string  `json:"address"`
	Up      bool    `json:"up"`
	RTT     float64 `json:"rtt_ms"`
	MinRTT  float64 `json:"min_rtt_ms"`
}

// PairStatus is the set of one (source, destination) pair.
type PairStatus struct {
	Source      string      `json:"source"`
	Destination string      `json:"destination"`
	ELPs        []ELPStatus `json:"elps"`
	// Changed is when the set last changed and Reason why; Changes how
	// many times it did; Pending how many computations in a row found a
	// better set, waiting for the hysteresis.
	Changed   time.Time `json:"changed,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	Changes   int       `json:"changes"`
	Pending   int       `json:"pending"`
	Computed  time.Time `json:"computed,omitzero"`
	LastAsked time.Time `json:"last_asked,omitzero"`
	Note      string    `json:"note,omitempty"`
	// Excluded are the candidates of the last computation left out, and
	// why.
	Excluded []string `json:"excluded,omitempty"`
}

// ELPStatus is one ELP of a set: its path ID (its slot plus one), its
// nodes and hops, and its RTT when chosen.
type ELPStatus struct {
	PathID int      `json:"path_id"`
	Nodes  []string `json:"nodes"`
	Hops   []string `json:"hops"`
	RTT    float64  `json:"rtt_ms"`
}

// DestStatus is a destination's path slots, in the order of its replies,
// and, for its prefixes whose ETR answers for itself, when it was last
// sent its sets.
type DestStatus struct {
	Name   string       `json:"name"`
	Slots  []SlotStatus `json:"slots"`
	Pushed []PushStatus `json:"pushed,omitempty"`
}

// PushStatus is when a prefix's ETR was last sent the sets.
type PushStatus struct {
	EID string    `json:"eid"`
	At  time.Time `json:"at"`
}

// SlotStatus is a slot: its ELP's hops and sources, or since when no
// source uses it.
type SlotStatus struct {
	PathID  int       `json:"path_id"`
	Hops    []string  `json:"hops,omitempty"`
	Users   int       `json:"users"`
	Retired time.Time `json:"retired,omitzero"`
}

// Counters are the te role's counters and gauges, for the metrics.
type Counters struct {
	Nodes, Vertices, Edges, Pairs int
	// Scrapes and ScrapeErrors count the reads of the nodes' RTTs;
	// Computations the sets computed, Changes those adopted; Answers the
	// Map-Replies engineered, to a source with its set (masked) or with
	// every ELP in use; SMRs the Solicit-Map-Requests sent; SlotsFull
	// the sets not adopted for want of a path slot; Pushes the sets sent
	// to ETRs that answer for themselves (per ETR and prefix).
	Scrapes, ScrapeErrors, Computations, Changes uint64
	AnswersMasked, AnswersAll, SMRs, SlotsFull   uint64
	Pushes                                       uint64
	Matrix                                       []Link
	Sets                                         []SetGauge
}

// SetGauge is a pair's set: how many ELPs, how long since it changed,
// and why it did.
type SetGauge struct {
	Source, Destination string
	ELPs                int
	Age                 time.Duration
	Reason              string
}

// Status returns a snapshot of the role.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{Graph: e.snap.built, Vertices: e.snap.g.Nodes(), Edges: e.snap.g.Edges()}
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		ns := NodeStatus{Name: name, Role: n.role, Configured: n.configured, Metrics: n.metrics, Read: n.read, Error: n.err}
		for _, a := range n.addrs {
			ns.RLOCs = append(ns.RLOCs, a.String())
		}
		for _, eid := range n.eids {
			ns.EIDs = append(ns.EIDs, eid.String())
		}
		st.Nodes = append(st.Nodes, ns)
	}
	st.Matrix = e.matrix()
	for _, p := range e.pairs {
		ps := PairStatus{Source: p.key.src, Destination: p.key.dst, Changes: p.tracker.Changes(), Pending: p.tracker.Pending(),
			Computed: p.computed, LastAsked: p.lastAsked, Note: p.note, Excluded: p.excluded}
		if p.tracker.Changes() > 0 {
			ps.Changed, ps.Reason = p.tracker.Changed()
		}
		for i, l := range p.set {
			es := ELPStatus{Nodes: l.nodes, RTT: l.rtt * 1000}
			if i < len(p.slots) {
				es.PathID = p.slots[i] + 1
			}
			for _, h := range l.hops {
				es.Hops = append(es.Hops, h.String())
			}
			ps.ELPs = append(ps.ELPs, es)
		}
		st.Pairs = append(st.Pairs, ps)
	}
	slices.SortFunc(st.Pairs, func(a, b PairStatus) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Destination, b.Destination))
	})
	for _, name := range slices.Sorted(maps.Keys(e.dests)) {
		ds := DestStatus{Name: name}
		for i, sl := range e.dests[name].slots.All() {
			ss := SlotStatus{PathID: i + 1, Users: sl.Users}
			if sl.Key != "" && sl.Users == 0 {
				ss.Retired = sl.Retired
			}
			for _, h := range sl.Value.hops {
				if sl.Key != "" {
					ss.Hops = append(ss.Hops, h.String())
				}
			}
			ds.Slots = append(ds.Slots, ss)
		}
		d := e.dests[name]
		for _, eid := range slices.SortedFunc(maps.Keys(d.pushed), compareEIDs) {
			ds.Pushed = append(ds.Pushed, PushStatus{EID: eid.String(), At: d.pushed[eid].at})
		}
		if len(ds.Slots) > 0 || len(ds.Pushed) > 0 {
			st.Destinations = append(st.Destinations, ds)
		}
	}
	return st
}

// matrix lists every node's row, by node and address. The caller holds
// the lock.
func (e *Engine) matrix() []Link {
	var out []Link
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		for _, a := range sortedAddrs(n.rows) {
			r := n.rows[a]
			to := ""
			if v := e.byAddr[a]; v != nil {
				to = v.name
			}
			out = append(out, Link{From: name, To: to, Address: a.String(), Up: r.Up,
				RTT: float64(r.RTT) / float64(time.Millisecond), MinRTT: float64(r.MinRTT) / float64(time.Millisecond)})
		}
	}
	return out
}

// Counters returns the counters and gauges.
func (e *Engine) Counters() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counters()
}

func (e *Engine) counters() Counters {
	k := &e.counter
	c := Counters{
		Nodes: len(e.nodes), Vertices: e.snap.g.Nodes(), Edges: e.snap.g.Edges(), Pairs: len(e.pairs),
		Scrapes: k.scrapes.Load(), ScrapeErrors: k.scrapeErrors.Load(), Computations: k.computations.Load(),
		Changes: k.changes.Load(), AnswersMasked: k.answersMasked.Load(), AnswersAll: k.answersAll.Load(),
		SMRs: k.smrs.Load(), SlotsFull: k.slotsFull.Load(), Pushes: k.pushes.Load(),
		Matrix: e.matrix(),
	}
	now := e.now()
	for _, p := range e.pairs {
		g := SetGauge{Source: p.key.src, Destination: p.key.dst, ELPs: len(p.set)}
		if at, why := p.tracker.Changed(); !at.IsZero() {
			g.Age, g.Reason = now.Sub(at), why
		}
		c.Sets = append(c.Sets, g)
	}
	return c
}

func sortedAddrs(rows map[netip.Addr]Row) []netip.Addr {
	return slices.SortedFunc(maps.Keys(rows), netip.Addr.Compare)
}
