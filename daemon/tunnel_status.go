package daemon

import (
	"strings"
	"time"

	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/dataplane"
)

// TunnelCounters are the counters of the xtr and rtr roles.
type TunnelCounters struct {
	// The xtr: Map-Registers sent, Map-Notifies by result ("accepted" or
	// why refused), registration rounds without a Map-Notify, Map-Requests
	// given to it by result, SMRs sent.
	MapRegisters     uint64            `json:"map_registers_sent"`
	MapNotifies      map[string]uint64 `json:"map_notifies"`
	RegisterFailures uint64            `json:"register_failures"`
	RequestsAnswered map[string]uint64 `json:"map_requests_received"`
	SMRsSent         uint64            `json:"smrs_sent"`
	// Stateful binding at the ETR, by event (bound, waited for the SYN,
	// ended with the subflow, expired, RTR asking for a subflow not
	// bound), and the bindings now.
	Bindings    map[string]uint64 `json:"bindings"`
	BindingsNow int               `json:"bindings_now"`
	// The map-cache: misses from the data plane, Map-Requests sent (tries
	// included) and those that had no reply, Map-Replies by result
	// ("accepted", "unsolicited"), their records by what became of them,
	// SMRs received, entries now, expired and evicted.
	Misses          uint64            `json:"misses"`
	MapRequests     uint64            `json:"map_requests_sent"`
	RequestsFailed  uint64            `json:"map_requests_failed"`
	MapReplies      map[string]uint64 `json:"map_replies"`
	MapReplyRecords map[string]uint64 `json:"map_reply_records"`
	SMRsReceived    uint64            `json:"smrs_received"`
	Entries         int               `json:"map_cache_entries"`
	Expired         uint64            `json:"map_cache_expired"`
	Evicted         uint64            `json:"map_cache_evicted"`
	// Packets held while their mappings were resolved (miss: hold), by
	// what became of them ("held" counts them all), and held now.
	Held    map[string]uint64 `json:"held_packets"`
	HeldNow int               `json:"held_packets_now"`
	// Stateful binding at the ITR, by event: subflows reported, asked
	// for, pinned to the ETR's choice, left unbound. Multi-layer paths:
	// installations not expanded, loops refused, entries expanded again.
	StatefulSubflows map[string]uint64 `json:"stateful_subflows"`
	Expansions       map[string]uint64 `json:"expansions"`
	// RLOC probing: probes sent, answered, missed, replies that matched
	// no probe; and each probed locator's state and smoothed RTT.
	ProbesSent      uint64         `json:"probes_sent"`
	ProbesAnswered  uint64         `json:"probes_answered"`
	ProbesMissed    uint64         `json:"probes_missed"`
	ProbesUnmatched uint64         `json:"probe_replies_unmatched"`
	Locators        []LocatorGauge `json:"locators,omitempty"`
	// Dataplane are the data plane's packet counters by name, or
	// DataplaneError why it could not give them.
	Dataplane      map[string]uint64 `json:"dataplane,omitempty"`
	DataplaneError string            `json:"dataplane_error,omitempty"`
}

// LocatorGauge is a probed locator: up or down, its smoothed RTT and
// the least RTT of the last half minute, in seconds (0 until it
// answered).
type LocatorGauge struct {
	Address string  `json:"address"`
	Up      bool    `json:"up"`
	RTT     float64 `json:"rtt_seconds"`
	MinRTT  float64 `json:"min_rtt_seconds"`
}

func (t *tunnel) counters() *TunnelCounters {
	x, mc := t.xtr.Counters(), t.cache.Counters()
	c := &TunnelCounters{
		MapRegisters: x.Registers, RegisterFailures: x.Failures, SMRsSent: x.SMRs,
		MapNotifies: map[string]uint64{}, RequestsAnswered: map[string]uint64{},
		Misses: mc.Misses, MapRequests: mc.Requests, RequestsFailed: mc.Failed,
		MapReplies:      map[string]uint64{"accepted": mc.Replies, "unsolicited": mc.Unsolicited},
		MapReplyRecords: map[string]uint64{},
		SMRsReceived:    mc.SMRs, Entries: mc.Entries, Expired: mc.Expired, Evicted: mc.Evicted,
		Held: map[string]uint64{"held": mc.Hold.Held, "released": mc.Hold.Released,
			"dropped-eid-full": mc.Hold.EIDFull, "dropped-total-full": mc.Hold.TotalFull,
			"dropped-negative": mc.Hold.Negative, "dropped-unresolved": mc.Hold.Unresolved,
			"release-errors": mc.Hold.ReleaseErrors},
		HeldNow: mc.Hold.Now,
		Bindings: map[string]uint64{"bound": x.Bound, "waited": x.Waited, "ended": x.Ended, "expired": x.Expired,
			"rtr_unbound": x.RTRUnbound},
		BindingsNow: x.Bindings,
		StatefulSubflows: map[string]uint64{"reported": mc.FlowEvents, "asked": mc.FlowRequests, "pinned": mc.FlowPinned,
			"unbound": mc.FlowUnbound},
		Expansions: map[string]uint64{"unexpanded": mc.Unexpanded, "loop": mc.Loops, "reexpanded": mc.Reexpanded},
	}
	for _, r := range xtr.NotifyResults() {
		c.MapNotifies[r.String()] = x.Notifies[r]
	}
	for _, r := range xtr.RequestResults() {
		c.RequestsAnswered[r.String()] = x.Requests[r]
	}
	for _, r := range mapcache.Reasons() {
		c.MapReplyRecords[r.String()] = mc.Records[r]
	}
	if t.prober != nil {
		p := t.prober.Counters()
		c.ProbesSent, c.ProbesAnswered, c.ProbesMissed, c.ProbesUnmatched = p.Sent, p.Answered, p.Missed, p.Unmatched
		for _, l := range t.prober.Matrix() {
			c.Locators = append(c.Locators, LocatorGauge{Address: l.Address, Up: l.Up, RTT: l.SRTT / 1000, MinRTT: l.MinRTT / 1000})
		}
	}
	if dc, err := t.dp.Counters(); err != nil {
		c.DataplaneError = err.Error()
	} else {
		c.Dataplane = dc
	}
	return c
}

// DataplaneStatus is what the data plane says in `lispd status`: its
// counters and the MPTCP subflows it bound to paths, or why it could not.
type DataplaneStatus struct {
	Counters map[string]uint64 `json:"counters,omitempty"`
	Subflows []SubflowStatus   `json:"subflows,omitempty"`
	Error    string            `json:"error,omitempty"`
	// Pinning is where the data plane is kept across restarts;
	// Adoption what it took over from the lispd before, if anything.
	Pinning  dataplane.Pinning   `json:"pinning"`
	Adoption *dataplane.Adoption `json:"adoption,omitempty"`
}

// SubflowStatus is an MPTCP subflow bound to a path.
type SubflowStatus struct {
	InstanceID uint32    `json:"instance_id"`
	Local      string    `json:"local"`
	Remote     string    `json:"remote"`
	Connection uint64    `json:"connection"`
	Path       int       `json:"path"`
	Initiator  bool      `json:"initiator"`
	Closing    bool      `json:"closing"`
	Asked      bool      `json:"asked,omitempty"`
	Pinned     bool      `json:"pinned,omitempty"`
	Packets    uint64    `json:"packets"`
	Bytes      uint64    `json:"bytes"`
	LastSeen   time.Time `json:"last_seen"`
}

func (t *tunnel) dataplaneStatus() *DataplaneStatus {
	st := &DataplaneStatus{Pinning: t.dp.Pinning(), Adoption: t.dp.Adoption()}
	var errs []string
	if c, err := t.dp.Counters(); err != nil {
		errs = append(errs, "counters: "+err.Error())
	} else {
		st.Counters = c
	}
	if subs, err := t.dp.Subflows(); err != nil {
		errs = append(errs, "subflows: "+err.Error())
	} else {
		for _, s := range subs {
			st.Subflows = append(st.Subflows, SubflowStatus{
				InstanceID: s.InstanceID, Local: s.Local.String(), Remote: s.Remote.String(),
				Connection: s.Connection, Path: s.Path, Initiator: s.Initiator, Closing: s.Closing,
				Asked: s.Asked, Pinned: s.Pinned,
				Packets: s.Packets, Bytes: s.Bytes, LastSeen: s.LastSeen,
			})
		}
	}
	st.Error = strings.Join(errs, "; ")
	return st
}
