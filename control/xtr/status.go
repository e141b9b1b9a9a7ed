package xtr

import (
	"sync/atomic"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// NotifyResult is what became of a Map-Notify: accepted, or why it was
// refused.
type NotifyResult uint8

const (
	NotifyAccepted        NotifyResult = iota
	NotifyMalformed                    // does not decode
	NotifyUnknownNonce                 // acknowledges no Map-Register awaiting it, nor is news of this xTR's merged locators
	NotifyUnauthenticated              // algorithm 0
	NotifyWrongKey                     // another key ID or algorithm than the map-server's
	NotifyAuthFailed                   // the authentication data does not verify
	NotifyUnsolicited                  // a map-server's news of merged locators: acknowledged
	NotifyTESets                       // the te role's sets of the site's prefixes: kept, acknowledged
	numNotifyResults
)

var notifyNames = [numNotifyResults]string{
	NotifyAccepted:        "accepted",
	NotifyMalformed:       "malformed",
	NotifyUnknownNonce:    "unknown-nonce",
	NotifyUnauthenticated: "unauthenticated",
	NotifyWrongKey:        "wrong-key",
	NotifyAuthFailed:      "auth-failed",
	NotifyUnsolicited:     "unsolicited",
	NotifyTESets:          "te-sets",
}

func (r NotifyResult) String() string { return notifyNames[r] }

// NotifyResults lists every result, for exporting counters with all labels.
func NotifyResults() []NotifyResult {
	r := make([]NotifyResult, numNotifyResults)
	for i := range r {
		r[i] = NotifyResult(i)
	}
	return r
}

// RequestResult is what became of a Map-Request given to the xtr.
type RequestResult uint8

const (
	RequestAnswered   RequestResult = iota // a Map-Reply for a database mapping
	RequestProbe                           // an RLOC probe for a database mapping, answered
	RequestProbeOther                      // an RLOC probe for another EID, answered with no locators
	RequestNotOurs                         // for no database mapping: not answered
	RequestNoRecords                       // asks for nothing
	RequestNoITRRLOC                       // no ITR-RLOC to answer to
	RequestBound                           // a stateful request: answered with its subflow's ELP
	RequestRTRUnbound                      // a stateful request of an RTR for a subflow not bound: not answered
	numRequestResults
)

var requestNames = [numRequestResults]string{
	RequestAnswered:   "answered",
	RequestProbe:      "probe",
	RequestProbeOther: "probe-other-eid",
	RequestNotOurs:    "not-ours",
	RequestNoRecords:  "no-records",
	RequestNoITRRLOC:  "no-itr-rloc",
	RequestBound:      "bound",
	RequestRTRUnbound: "rtr-unbound",
}

func (r RequestResult) String() string { return requestNames[r] }

// RequestResults lists every result, for exporting counters with all labels.
func RequestResults() []RequestResult {
	r := make([]RequestResult, numRequestResults)
	for i := range r {
		r[i] = RequestResult(i)
	}
	return r
}

type counters struct {
	registers, failures, smrs, sendErrors atomic.Uint64
	bound, waited, rtrUnbound             atomic.Uint64
	ended, expired                        atomic.Uint64
	notifies                              [numNotifyResults]atomic.Uint64
	requests                              [numRequestResults]atomic.Uint64
}

// Counters is a snapshot of the xtr's counters.
type Counters struct {
	// Registers counts the Map-Registers sent, Failures the registration
	// rounds that had no Map-Notify after all their tries.
	Registers, Failures uint64
	// Notifies counts Map-Notifies by result.
	Notifies [numNotifyResults]uint64
	// Requests counts Map-Requests by result.
	Requests [numRequestResults]uint64
	// SMRs counts the Solicit-Map-Requests sent.
	SMRs, SendErrors uint64
	// Stateful binding: Bound counts the subflows bound, Waited the
	// requests that waited for their subflow's SYN, RTRUnbound the
	// requests of RTRs for subflows not bound (not answered); Ended the
	// bindings that ended with their subflow, Expired those nobody asked
	// for in their TTL or whose subflow never came; Bindings the bindings
	// now.
	Bound, Waited, RTRUnbound, Ended, Expired uint64
	Bindings                                  int
}

// Counters returns the current counters.
func (x *XTR) Counters() Counters {
	c := Counters{
		Registers: x.counter.registers.Load(), Failures: x.counter.failures.Load(),
		SMRs: x.counter.smrs.Load(), SendErrors: x.counter.sendErrors.Load(),
		Bound: x.counter.bound.Load(), Waited: x.counter.waited.Load(), RTRUnbound: x.counter.rtrUnbound.Load(),
		Ended: x.counter.ended.Load(), Expired: x.counter.expired.Load(),
	}
	x.mu.Lock()
	c.Bindings = len(x.bindings)
	x.mu.Unlock()
	for i := range c.Notifies {
		c.Notifies[i] = x.counter.notifies[i].Load()
	}
	for i := range c.Requests {
		c.Requests[i] = x.counter.requests[i].Load()
	}
	return c
}

// Status is what `lispd status` shows of the xtr: its mappings and its
// registration with each map-server.
type Status struct {
	Mappings   []MappingStatus   `json:"mappings"`
	MapServers []MapServerStatus `json:"map_servers"`
	// ITRs is how many ITRs asked for a mapping lately: SMRs go to them.
	ITRs int `json:"recent_itrs"`
	// Bindings are the subflows bound to ELPs (stateful binding).
	Bindings []BindingStatus `json:"bindings,omitempty"`
}

// MappingStatus is a database mapping.
type MappingStatus struct {
	EID      string          `json:"eid"`
	TTL      string          `json:"ttl"`
	Locators []LocatorStatus `json:"locators"`
	// Sets are the te role's, by source prefix (0/0: anyone else).
	Sets []SetStatus `json:"te_sets,omitempty"`
}

// SetStatus is the te role's set of a mapping for a source.
type SetStatus struct {
	Source   string          `json:"source"`
	Locators []LocatorStatus `json:"locators"`
	Expires  time.Time       `json:"expires"`
}

// LocatorStatus is a locator of a database mapping: an RLOC or an ELP,
// written as the lisp package writes addresses.
type LocatorStatus struct {
	Address   string `json:"address"`
	Priority  uint8  `json:"priority"`
	Weight    uint8  `json:"weight"`
	Reachable bool   `json:"reachable"`
}

// MapServerStatus is the registration with one map-server.
type MapServerStatus struct {
	Address    string `json:"address"`
	ProxyReply bool   `json:"proxy_reply"`
	KeyID      uint8  `json:"key_id"`
	Algorithm  string `json:"algorithm"`
	// State is "registered" (the last round was acknowledged),
	// "registering" (a round awaits its Map-Notify), "failing" (the last
	// round had none) or "not-registered" (none sent yet).
	State          string    `json:"state"`
	LastRegister   time.Time `json:"last_register,omitzero"`
	LastNotify     time.Time `json:"last_notify,omitzero"`
	Registers      uint64    `json:"map_registers"`
	Notifies       uint64    `json:"map_notifies"`
	Failures       uint64    `json:"failures"`
	FailuresInARow uint64    `json:"failures_in_a_row"`
	LastFailure    string    `json:"last_failure,omitempty"`
	LastFailureAt  time.Time `json:"last_failure_at,omitzero"`
	// Unsolicited counts the Map-Notifies of merged locators the
	// map-server sent and the xtr acknowledged, the last at
	// LastUnsolicited.
	Unsolicited     uint64    `json:"unsolicited_notifies"`
	LastUnsolicited time.Time `json:"last_unsolicited_notify,omitzero"`
}

// Status returns a snapshot of the mappings and registrations.
func (x *XTR) Status() Status {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := Status{ITRs: len(x.itrs), Bindings: x.bindingStatus()}
	for _, m := range x.mappings {
		ms := MappingStatus{EID: m.eid.String(), TTL: m.cfg.TTL.String(), Locators: locatorStatus(m.record.Locators)}
		for _, set := range x.sets[m.eid] {
			ms.Sets = append(ms.Sets, SetStatus{Source: set.source.String(), Locators: locatorStatus(set.record.Locators), Expires: set.expires})
		}
		st.Mappings = append(st.Mappings, ms)
	}
	for _, s := range x.servers {
		ss := MapServerStatus{
			Address: s.addr.String(), ProxyReply: s.proxy, KeyID: s.keyID, Algorithm: s.alg.String(),
			LastRegister: s.lastRegister, LastNotify: s.lastNotify, Registers: s.registers, Notifies: s.notifies,
			Failures: s.failures, FailuresInARow: s.failuresInARow, LastFailure: s.lastFailure, LastFailureAt: s.lastFailureAt,
			Unsolicited: s.unsolicited, LastUnsolicited: s.lastUnsolicited,
		}
		switch {
		case len(s.round) > 0:
			ss.State = "registering"
		case s.failuresInARow > 0:
			ss.State = "failing"
		case s.notifies > 0:
			ss.State = "registered"
		default:
			ss.State = "not-registered"
		}
		st.MapServers = append(st.MapServers, ss)
	}
	return st
}

func locatorStatus(locs []lisp.Locator) []LocatorStatus {
	out := make([]LocatorStatus, len(locs))
	for i, l := range locs {
		out[i] = LocatorStatus{Address: l.Address.String(), Priority: l.Priority, Weight: l.Weight, Reachable: l.Reachable}
	}
	return out
}
