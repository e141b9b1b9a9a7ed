package xtr

import (
	"sync/atomic"
	"time"
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
	numRequestResults
)

var requestNames = [numRequestResults]string{
	RequestAnswered:   "answered",
	RequestProbe:      "probe",
	RequestProbeOther: "probe-other-eid",
	RequestNotOurs:    "not-ours",
	RequestNoRecords:  "no-records",
	RequestNoITRRLOC:  "no-itr-rloc",
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
}

// Counters returns the current counters.
func (x *XTR) Counters() Counters {
	c := Counters{
		Registers: x.counter.registers.Load(), Failures: x.counter.failures.Load(),
		SMRs: x.counter.smrs.Load(), SendErrors: x.counter.sendErrors.Load(),
	}
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
}

// MappingStatus is a database mapping.
type MappingStatus struct {
	EID      string          `json:"eid"`
	TTL      string          `json:"ttl"`
	Locators []LocatorStatus `json:"locators"`
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
	st := Status{ITRs: len(x.itrs)}
	for _, m := range x.mappings {
		ms := MappingStatus{EID: m.eid.String(), TTL: m.cfg.TTL.String()}
		for _, l := range m.record.Locators {
			ms.Locators = append(ms.Locators, LocatorStatus{
				Address: l.Address.String(), Priority: l.Priority, Weight: l.Weight, Reachable: l.Reachable,
			})
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
