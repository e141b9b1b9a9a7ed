package pm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Mapping is what the mapping system says about an EID, reduced to what
// a plan needs: how many paths an xTR would spread flows over.
type Mapping struct {
	// EID is the record's EID-prefix, which the answer is cached for.
	EID mapping.EID `json:"eid"`
	// TTL is how long the answer may be kept.
	TTL time.Duration `json:"ttl"`
	// Negative is set when the record has no locators: the EID is not
	// in a LISP site (or not registered).
	Negative bool `json:"negative,omitempty"`
	// RLOCs and ELPs count the usable locators of the best priority, the
	// paths an xTR chooses from: plain RLOCs and Explicit Locator Paths.
	RLOCs int `json:"rlocs"`
	ELPs  int `json:"elps"`
	// Replier answered in RTT.
	Replier netip.AddrPort `json:"replier"`
	RTT     time.Duration  `json:"rtt"`
}

// Paths is the number of paths, RLOCs and ELPs; 0 for a nil or negative
// mapping.
func (m *Mapping) Paths() int {
	if m == nil {
		return 0
	}
	return m.RLOCs + m.ELPs
}

// Query is a lookup of the mapping of EID. From is the host that would
// send to it, the request's source EID: a traffic-engineered mapping
// depends on the site that asks (docs/te.md), so this host's own mapping
// is asked as the peer's site would get it, the paths the peer's xTR has
// towards this host. Local says EID is this host's own (the local xTR
// may answer for it).
type Query struct {
	EID, From netip.Addr
	Local     bool
}

// Mapper asks the mapping system for the mapping of an EID.
type Mapper interface {
	Lookup(ctx context.Context, q Query) (Mapping, error)
}

// MappingOf reads the record of reply that covers eid as a Mapping. Like
// an xTR (docs/routers.md, "Choosing a path"), it counts only locators
// with the R bit, a priority below 255, an address a data plane can use
// (an IP address, an ELP, an AFI List holding either), and of the best
// priority among those.
func MappingOf(reply *lisp.MapReply, eid netip.Addr) (Mapping, error) {
	for _, rec := range reply.Records {
		e, err := mapping.FromWire(rec.EID, rec.MaskLen)
		if err != nil || !e.Prefix.Contains(eid) {
			continue
		}
		m := Mapping{EID: e, TTL: recordTTL(rec.TTL), Negative: len(rec.Locators) == 0}
		best := -1
		for _, l := range rec.Locators {
			if kind := pathKind(l.Address); kind != pathNone && l.Reachable && l.Priority < 255 && (best < 0 || int(l.Priority) < best) {
				best = int(l.Priority)
			}
		}
		for _, l := range rec.Locators {
			if !l.Reachable || int(l.Priority) != best {
				continue
			}
			switch pathKind(l.Address) {
			case pathRLOC:
				m.RLOCs++
			case pathELP:
				m.ELPs++
			}
		}
		return m, nil
	}
	return Mapping{}, fmt.Errorf("map-reply has no record for %s", eid)
}

// recordTTL converts a record's TTL (minutes). TTLForever lets the
// receiver choose: the cache's maximum applies.
func recordTTL(minutes uint32) time.Duration {
	if minutes == lisp.TTLForever {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(minutes) * time.Minute
}

type kind uint8

const (
	pathNone kind = iota
	pathRLOC
	pathELP
)

// pathKind tells a locator's address as a data plane reads it (package
// control/mapcache): an IP address is an RLOC; an ELP alone or in an AFI
// List is an ELP; an AFI List of addresses is an RLOC.
func pathKind(a lisp.Address) kind {
	if a.IP().IsValid() {
		return pathRLOC
	}
	switch l := a.LCAF().(type) {
	case *lisp.ELP:
		if len(l.Hops) > 0 {
			return pathELP
		}
	case *lisp.AFIList:
		k := pathNone
		for _, in := range l.Addresses {
			switch pathKind(in) {
			case pathELP:
				return pathELP
			case pathRLOC:
				k = pathRLOC
			}
		}
		return k
	}
	return pathNone
}

// LigMapper asks with Encapsulated Map-Requests (package lig).
type LigMapper struct {
	// Resolver is asked for peers' EIDs, and for the local one when XTR
	// is not set.
	Resolver, XTR netip.AddrPort
	// Options are lig's: source, instance ID, tries and timeout.
	Options lig.Options
}

// NewLigMapper returns the mapper of a validated amptcp configuration.
func NewLigMapper(a *AMPTCP) (*LigMapper, error) {
	m := &LigMapper{Options: lig.Options{Tries: a.Tries, Timeout: a.Timeout.Duration}}
	var err error
	if m.Resolver, err = config.ListenAddr(a.MapResolver); err != nil {
		return nil, fmt.Errorf("amptcp.map-resolver: %w", err)
	}
	if a.XTR != "" {
		if m.XTR, err = config.ListenAddr(a.XTR); err != nil {
			return nil, fmt.Errorf("amptcp.xtr: %w", err)
		}
	}
	if a.Source != "" {
		if m.Options.Source, err = netip.ParseAddr(a.Source); err != nil {
			return nil, fmt.Errorf("amptcp.source: %w", err)
		}
	}
	if a.InstanceID != nil {
		m.Options.IID, m.Options.HasIID = *a.InstanceID, true
	}
	return m, nil
}

// ErrNoAnswer wraps the failure of a lookup that got no Map-Reply.
var ErrNoAnswer = errors.New("the mapping system did not answer")

// Lookup sends Map-Requests for q's EID, from q's source EID, and reads
// the reply.
func (m *LigMapper) Lookup(ctx context.Context, q Query) (Mapping, error) {
	opts := m.Options
	opts.Resolver = m.Resolver
	if q.Local && m.XTR.IsValid() {
		opts.Resolver = m.XTR
	}
	opts.SourceEID = q.From
	eid := q.EID
	res, err := lig.Query(ctx, eid, opts)
	if err != nil {
		if errors.Is(err, lig.ErrNoReply) {
			return Mapping{}, fmt.Errorf("%w: %d map-requests to %s", ErrNoAnswer, res.Tries, opts.Resolver)
		}
		return Mapping{}, err
	}
	mp, err := MappingOf(res.Reply, eid)
	if err != nil {
		return Mapping{}, err
	}
	mp.Replier, mp.RTT = res.Replier, res.RTT
	return mp, nil
}

// mapCache keeps mappings per EID-prefix until their TTL runs out.
type mapCache struct {
	table  *mapping.Table[cached]
	maxTTL time.Duration
	iid    uint32
}

type cached struct {
	m       Mapping
	expires time.Time
}

func newMapCache(maxTTL time.Duration, iid uint32) *mapCache {
	return &mapCache{table: mapping.NewTable[cached](), maxTTL: maxTTL, iid: iid}
}

// get returns the mapping covering eid, if one is cached and fresh.
func (c *mapCache) get(eid netip.Addr, now time.Time) (Mapping, bool) {
	if c == nil {
		return Mapping{}, false
	}
	e, ok := c.table.Lookup(c.iid, eid)
	if !ok {
		return Mapping{}, false
	}
	if !now.Before(e.expires) {
		c.table.Delete(mapping.NewEID(c.iid, e.m.EID.Prefix))
		return c.get(eid, now) // a less specific entry may still hold
	}
	return e.m, true
}

// put caches m for its TTL, at most maxTTL.
func (c *mapCache) put(m Mapping, now time.Time) {
	if c == nil || m.TTL <= 0 {
		return
	}
	// Keyed by the configured instance: the one lookups ask for.
	c.table.Insert(mapping.NewEID(c.iid, m.EID.Prefix), cached{m: m, expires: now.Add(min(m.TTL, c.maxTTL))})
}

// len is the number of cached mappings, expired ones included until
// they are looked up.
func (c *mapCache) len() int {
	if c == nil {
		return 0
	}
	return c.table.Len()
}
