package mapcache

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/amptcp/amptcp/dataplane"
	"github.com/amptcp/amptcp/mapping"
)

// Reason is what became of a record of an accepted Map-Reply.
type Reason uint8

const (
	Installed       Reason = iota
	NotCached              // a TTL of 0: use once, do not cache
	NotRequested           // its EID-prefix does not cover the EID asked
	UnsupportedEID         // not an IPv4 or IPv6 prefix
	NoUsableLocator        // locators, none of which the data plane can use
	LocalEID               // one of the site's own EID-prefixes
	StaticEID              // the prefix of a static entry
	PutFailed              // the data plane refused it
	numReasons
)

var reasonNames = [numReasons]string{
	Installed:       "installed",
	NotCached:       "not-cached",
	NotRequested:    "not-requested",
	UnsupportedEID:  "unsupported-eid",
	NoUsableLocator: "no-usable-locator",
	LocalEID:        "local-eid",
	StaticEID:       "static-eid",
	PutFailed:       "put-failed",
}

func (r Reason) String() string { return reasonNames[r] }

// Reasons lists every reason, for exporting counters with all labels.
func Reasons() []Reason {
	r := make([]Reason, numReasons)
	for i := range r {
		r[i] = Reason(i)
	}
	return r
}

type counters struct {
	misses, missInvalid, missCached          atomic.Uint64
	requests, retried, failed, deduplicated  atomic.Uint64
	overload, noRLOC, sendErrors             atomic.Uint64
	replies, unsolicited, unusableLocators   atomic.Uint64
	records                                  [numReasons]atomic.Uint64
	smrs, smrIgnored, smrLimited, smrInvoked atomic.Uint64
	smrInFlight                              atomic.Uint64
	expired, evicted, full, reinstalled      atomic.Uint64
	unexpanded, loops, reexpanded            atomic.Uint64
	flowEvents, flowRequests, flowPinned     atomic.Uint64
	flowUnbound                              atomic.Uint64
	adopted                                  atomic.Uint64
	putErrors, deleteErrors                  atomic.Uint64
	hold                                     holdStats
}

// Counters is a snapshot of the map-cache's counters.
type Counters struct {
	// Misses the data plane reported; of them, Invalid ones and ones an
	// entry covered by then (Cached).
	Misses, MissInvalid, MissCached uint64
	// Requests counts the Map-Requests sent, tries included; Retried the
	// tries after the first; Failed the requests that had no reply after
	// all their tries; Deduplicated the misses and SMRs for an EID already
	// asked; Overload those dropped with too many requests in flight;
	// NoRLOC the requests that had no local RLOC to be answered at.
	Requests, Retried, Failed, Deduplicated, Overload, NoRLOC, SendErrors uint64
	// Replies counts the Map-Replies accepted, Unsolicited those refused
	// because their nonce matched no request; Records the records of the
	// accepted ones by what became of them.
	Replies, Unsolicited uint64
	Records              [numReasons]uint64
	UnusableLocators     uint64
	// SMRs counts the Solicit-Map-Requests received; of them, Ignored
	// those for no cached entry, Limited those within a second of the
	// last one for the entry (whose refresh waits for the second to end);
	// SMRInvoked the Map-Requests sent for them; SMRInFlight those for
	// an EID being asked for, asked again once answered.
	SMRs, SMRIgnored, SMRLimited, SMRInvoked, SMRInFlight uint64
	// Expired and Evicted entries (the latter for room); Full the entries
	// refused with the cache full of local prefixes; Reinstalled the
	// entries installed again when probing changed a path's state.
	Expired, Evicted, Full, Reinstalled uint64
	PutErrors, DeleteErrors             uint64
	// Adopted entries, kept by the data plane across a restart.
	Adopted uint64
	// Hold counts the packets held while their mappings were resolved.
	Hold HoldCounters
	// Unexpanded counts the installations of a path whose Lookup hops
	// could not be expanded (an EID still being looked up, a loop, too
	// many hops), Loops those refused for an RLOC twice; Reexpanded the
	// entries installed again because an EID of theirs changed.
	Unexpanded, Loops, Reexpanded uint64
	// Stateful binding: FlowEvents counts the new subflows the data
	// plane reported, FlowRequests the stateful Map-Requests for them
	// (tries not included), FlowPinned the subflows pinned to the ELP
	// their ETR chose, FlowUnbound those left where they were (the
	// answer bound nothing, or its ELP never came); the requests that
	// had no answer count in Failed.
	FlowEvents, FlowRequests, FlowPinned, FlowUnbound uint64
	// Entries is the number of entries now, Pending the requests in flight.
	Entries, Pending int
}

// Counters returns the current counters.
func (c *Cache) Counters() Counters {
	k := &c.counter
	out := Counters{
		Misses: k.misses.Load(), MissInvalid: k.missInvalid.Load(), MissCached: k.missCached.Load(),
		Requests: k.requests.Load(), Retried: k.retried.Load(), Failed: k.failed.Load(),
		Deduplicated: k.deduplicated.Load(), Overload: k.overload.Load(), NoRLOC: k.noRLOC.Load(),
		SendErrors: k.sendErrors.Load(), Replies: k.replies.Load(), Unsolicited: k.unsolicited.Load(),
		UnusableLocators: k.unusableLocators.Load(),
		SMRs:             k.smrs.Load(), SMRIgnored: k.smrIgnored.Load(), SMRLimited: k.smrLimited.Load(),
		SMRInvoked: k.smrInvoked.Load(), SMRInFlight: k.smrInFlight.Load(), Expired: k.expired.Load(), Evicted: k.evicted.Load(),
		Full: k.full.Load(), Reinstalled: k.reinstalled.Load(),
		PutErrors: k.putErrors.Load(), DeleteErrors: k.deleteErrors.Load(), Adopted: k.adopted.Load(),
		Unexpanded: k.unexpanded.Load(), Loops: k.loops.Load(), Reexpanded: k.reexpanded.Load(),
		FlowEvents: k.flowEvents.Load(), FlowRequests: k.flowRequests.Load(), FlowPinned: k.flowPinned.Load(),
		FlowUnbound: k.flowUnbound.Load(),
	}
	for i := range out.Records {
		out.Records[i] = k.records[i].Load()
	}
	out.Hold = k.hold.snapshot()
	c.mu.Lock()
	out.Entries, out.Pending, out.Hold.Now = c.entries.Len(), len(c.pending)+len(c.flows), c.heldTotal
	c.mu.Unlock()
	return out
}

// Entry is a map-cache entry as `lispd status` shows it.
type Entry struct {
	InstanceID uint32 `json:"instance_id"`
	EIDPrefix  string `json:"eid_prefix"`
	Action     string `json:"action"`
	// Local marks the site's own prefixes, forwarded natively; Static
	// the entries of the configuration.
	Local  bool   `json:"local,omitempty"`
	Static bool   `json:"static,omitempty"`
	Paths  []Path `json:"paths,omitempty"`
	// Source is who sent the Map-Reply: the map-server (proxy reply) or
	// the ETR; "adopted" for an entry the data plane kept across a
	// restart of lispd, until a Map-Reply replaces it (AdoptedPaths
	// says how many paths it has there).
	Source       string    `json:"source,omitempty"`
	AdoptedPaths int       `json:"adopted_paths,omitempty"`
	Installed    time.Time `json:"installed"`
	Expires      time.Time `json:"expires,omitzero"`
	// TTLLeft is how long until the entry expires, in whole seconds.
	TTLLeft int64 `json:"ttl_left_seconds,omitempty"`
}

// Path is one path of an entry.
type Path struct {
	Hops     []Hop `json:"hops"`
	Priority uint8 `json:"priority"`
	Weight   uint8 `json:"weight"`
	// Reachable is the locator's R bit in the Map-Reply; Up whether the
	// data plane may use the path (R, its Lookup hops expanded and the
	// hops it must use reachable), and Down why not, beyond those.
	Reachable bool   `json:"reachable"`
	Up        bool   `json:"up"`
	Down      string `json:"down,omitempty"`
	// Expanded are the hops the data plane takes, when they are not
	// Hops: Lookup hops expanded, hops found down gone around.
	Expanded []string `json:"expanded,omitempty"`
}

// Hop is one hop of a path: the RLOC of a plain locator, or a hop of an
// ELP with its bits.
type Hop struct {
	Address string `json:"address"`
	Lookup  bool   `json:"lookup,omitempty"`
	Probe   bool   `json:"probe,omitempty"`
	Strict  bool   `json:"strict,omitempty"`
	// Up is what probing says (up until it says otherwise); RTT its
	// smoothed round-trip time in milliseconds, once it was answered.
	Up  bool    `json:"up"`
	RTT float64 `json:"rtt_ms,omitempty"`
}

// Snapshot returns the entries, sorted by instance ID and prefix.
func (c *Cache) Snapshot() []Entry {
	type keyed struct {
		key   mapping.EID
		entry Entry
	}
	now := c.now()
	c.mu.Lock()
	var all []keyed
	for key, e := range c.entries.All() {
		se := Entry{
			InstanceID: key.IID, EIDPrefix: key.Prefix.String(), Action: e.action.String(),
			Local: e.local, Static: e.static, Installed: e.installed,
		}
		if e.source.IsValid() {
			se.Source = e.source.String()
		}
		if e.adopted {
			se.Source, se.AdoptedPaths = "adopted", e.adoptedPaths
		}
		if !e.local && !e.static {
			se.Expires = e.expires
			se.TTLLeft = int64(max(e.expires.Sub(now), 0) / time.Second)
		}
		for _, p := range e.paths {
			se.Paths = append(se.Paths, c.pathStatus(key.IID, p))
		}
		all = append(all, keyed{key, se})
	}
	c.mu.Unlock()
	slices.SortFunc(all, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.key.IID, b.key.IID), a.key.Prefix.Addr().Compare(b.key.Prefix.Addr()),
			cmp.Compare(a.key.Prefix.Bits(), b.key.Prefix.Bits()))
	})
	out := make([]Entry, len(all))
	for i, k := range all {
		out[i] = k.entry
	}
	return out
}

// pathStatus is p's status. The caller holds the lock.
func (c *Cache) pathStatus(iid uint32, p path) Path {
	l := c.layout(iid, p)
	sp := Path{Priority: p.priority, Weight: p.weight, Reachable: p.reachable, Up: l.up, Down: l.why}
	if !slices.EqualFunc(l.hops, p.hops, func(a, b dataplane.Hop) bool { return a == b }) {
		for _, h := range l.hops {
			sp.Expanded = append(sp.Expanded, h.Addr.String())
		}
	}
	for _, h := range p.hops {
		sh := Hop{Address: h.Addr.String(), Lookup: h.Lookup, Probe: h.Probe, Strict: h.Strict,
			Up: !c.probed(h, len(p.hops)) || c.reachable(h.Addr)}
		if c.rtt != nil {
			if rtt, ok := c.rtt(h.Addr); ok {
				sh.RTT = float64(rtt) / float64(time.Millisecond)
			}
		}
		sp.Hops = append(sp.Hops, sh)
	}
	return sp
}
