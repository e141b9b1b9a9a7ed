package pm

import "maps"

// Counters are the path manager's counters since it started, for
// Prometheus (package metrics) and `amptcp pm status`.
type Counters struct {
	// Connections are the MPTCP connections tracked now.
	Connections int `json:"connections"`
	// Events counts the mptcp_pm events by type; Malformed those that
	// did not decode; Resyncs how often the state was read again from
	// sock_diag because events were lost.
	Events    map[string]uint64 `json:"events"`
	Malformed uint64            `json:"malformed"`
	Resyncs   uint64            `json:"resyncs"`
	// Plans counts the plans applied by policy (default for fallbacks
	// too), PlanSizes by their number of subflows; Fallbacks counts
	// connections that got the default policy because the mapping system
	// did not answer.
	Plans     map[string]uint64 `json:"plans"`
	PlanSizes map[int]uint64    `json:"plan_sizes"`
	Fallbacks uint64            `json:"fallbacks"`
	// Created counts the subflows created; CreateFailed the creates the
	// kernel refused, by errno; PortsInUse the source ports tried again
	// because the kernel found them in use.
	Created      uint64            `json:"created"`
	CreateFailed map[string]uint64 `json:"create_failed"`
	PortsInUse   uint64            `json:"ports_in_use"`
	// Broken counts the slots that lost their subflow, by reason (error,
	// closed, refused, stall, syn_timeout, lost, create_failed, ...);
	// Repaired those that got one established again, by the reason they
	// broke; Destroyed the subflows the path manager closed, by reason.
	Broken    map[string]uint64 `json:"broken"`
	Repaired  map[string]uint64 `json:"repaired"`
	Destroyed map[string]uint64 `json:"destroyed"`
	// Backups counts the subflows the backup policy gave backup
	// priority, Promotions those it gave regular priority again.
	Backups    uint64 `json:"backups"`
	Promotions uint64 `json:"promotions"`
	// Announced counts the addresses announced, AnnounceFailed the
	// announcements the kernel refused.
	Announced      uint64 `json:"announced"`
	AnnounceFailed uint64 `json:"announce_failed"`
	// Lookups counts mapping lookups by result: answered, negative,
	// failed, or cached (no request sent); LookupSeconds their latency;
	// CacheEntries the mappings cached now.
	Lookups       map[string]uint64 `json:"lookups"`
	LookupSeconds Histogram         `json:"lookup_seconds"`
	CacheEntries  int               `json:"cache_entries"`
	// SetupSeconds is the time from a connection's ESTABLISHED (or its
	// reaching min-bytes) to all its planned subflows established, the
	// mapping lookups included.
	SetupSeconds Histogram `json:"setup_seconds"`
}

// Histogram counts observations in buckets: Counts[i] those at most
// Bounds[i] (and above Bounds[i-1]); Counts has one more, for the rest.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// latencyBounds are the buckets of lookups and setups, in seconds: from a
// sub-millisecond answer on a LAN to a timeout.
var latencyBounds = []float64{0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h Histogram) clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

func (h *Histogram) observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += v
}

// counters are the engine's counts, in the engine's goroutine.
type counters struct {
	events                                    map[string]uint64
	malformed, resyncs                        uint64
	plans                                     map[string]uint64
	planSizes                                 map[int]uint64
	fallbacks, created, portsInUse            uint64
	createFailed, broken, repaired, destroyed map[string]uint64
	announced, announceFailed                 uint64
	backups, promotions                       uint64
	lookups                                   map[string]uint64
	latency, setup                            Histogram
}

func newCounters() counters {
	return counters{
		events: map[string]uint64{}, plans: map[string]uint64{}, planSizes: map[int]uint64{},
		createFailed: map[string]uint64{}, broken: map[string]uint64{}, repaired: map[string]uint64{},
		destroyed: map[string]uint64{}, lookups: map[string]uint64{},
		latency: newHistogram(latencyBounds), setup: newHistogram(latencyBounds),
	}
}

// counters copies the counts, for another goroutine.
func (e *engine) counters() Counters {
	c := &e.count
	return Counters{
		Connections: len(e.conns), Events: maps.Clone(c.events), Malformed: c.malformed, Resyncs: c.resyncs,
		Plans: maps.Clone(c.plans), PlanSizes: maps.Clone(c.planSizes), Fallbacks: c.fallbacks,
		Created: c.created, CreateFailed: maps.Clone(c.createFailed), PortsInUse: c.portsInUse,
		Broken: maps.Clone(c.broken), Repaired: maps.Clone(c.repaired), Destroyed: maps.Clone(c.destroyed),
		Announced: c.announced, AnnounceFailed: c.announceFailed, Backups: c.backups, Promotions: c.promotions,
		Lookups: maps.Clone(c.lookups), LookupSeconds: c.latency.clone(), CacheEntries: e.cacheLen(),
		SetupSeconds: c.setup.clone(),
	}
}

// cacheLen is how many mappings are cached, this host's for every peer.
func (e *engine) cacheLen() int {
	n := e.cache.len()
	for _, c := range e.localCache {
		n += c.len()
	}
	return n
}
