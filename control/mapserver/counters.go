package mapserver

import (
	"sync"
	"sync/atomic"
	"time"
)

// Reason is what became of a Map-Register: accepted, or why it was
// refused.
type Reason uint8

const (
	Accepted        Reason = iota
	Malformed              // does not decode
	NoRecords              // carries no EID-record
	UnsupportedEID         // an EID that is not an IPv4 or IPv6 prefix
	UnknownSite            // its first EID is in no site's prefixes
	OutsideSite            // another EID is outside that site's prefixes
	Unauthenticated        // algorithm 0 for a site that does not allow it
	UnknownKey             // no key of the site has its Key ID and algorithm
	AuthFailed             // the authentication data does not verify
	Replayed               // its nonce is not newer than the last accepted from the same xTR
	Stale                  // its nonce's time is older than the replay window, or than the map-server
	Future                 // its nonce's time is ahead of the map-server's clock by more than the window
	numReasons
)

var reasonNames = [numReasons]string{
	Accepted:        "accepted",
	Malformed:       "malformed",
	NoRecords:       "no-records",
	UnsupportedEID:  "unsupported-eid",
	UnknownSite:     "unknown-site",
	OutsideSite:     "outside-site",
	Unauthenticated: "unauthenticated",
	UnknownKey:      "unknown-key",
	AuthFailed:      "auth-failed",
	Replayed:        "replayed",
	Stale:           "stale",
	Future:          "future",
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

// AckResult is what became of a Map-Notify-Ack: accepted, or why it was
// refused.
type AckResult uint8

const (
	AckAccepted     AckResult = iota
	AckMalformed              // does not decode
	AckUnknownNonce           // acknowledges no Map-Notify awaiting it
	AckAuthFailed             // not signed with the key of the Map-Notify it acknowledges
	numAckResults
)

var ackNames = [numAckResults]string{
	AckAccepted:     "accepted",
	AckMalformed:    "malformed",
	AckUnknownNonce: "unknown-nonce",
	AckAuthFailed:   "auth-failed",
}

func (r AckResult) String() string { return ackNames[r] }

// AckResults lists every result, for exporting counters with all labels.
func AckResults() []AckResult {
	r := make([]AckResult, numAckResults)
	for i := range r {
		r[i] = AckResult(i)
	}
	return r
}

type counters struct {
	registers [numReasons]atomic.Uint64
	notifies  atomic.Uint64
	expired   atomic.Uint64
	// Unsolicited Map-Notifies: first sends, retransmissions, given up.
	unsolicited, retransmits, unacknowledged atomic.Uint64
	pushes                                   atomic.Uint64
	acks                                     [numAckResults]atomic.Uint64
}

// refusalEvery is how often a refusal is logged at most, per reason.
const refusalEvery = 10 * time.Second

// refusalLog lets one refusal per reason be logged every refusalEvery,
// and counts those it holds back.
type refusalLog struct {
	mu   sync.Mutex
	last [numReasons]time.Time
	held [numReasons]uint64
}

// allow says whether to log a refusal for r at now, and how many were not
// logged since the last one.
func (l *refusalLog) allow(r Reason, now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last[r].IsZero() && now.Sub(l.last[r]) < refusalEvery {
		l.held[r]++
		return false, 0
	}
	held := l.held[r]
	l.last[r], l.held[r] = now, 0
	return true, held
}

func (c *counters) add(r Reason) { c.registers[r].Add(1) }

// Counters is a snapshot of the map-server's counters.
type Counters struct {
	// Registers counts Map-Registers by what became of them.
	Registers [numReasons]uint64
	// Notifies counts the Map-Notifies sent, Expired the ETR
	// registrations that timed out.
	Notifies, Expired uint64
	// Unsolicited counts the Map-Notifies sent to the ETRs of merged
	// registrations whose locators changed, Retransmits their
	// retransmissions, Unacknowledged those given up on; Acks the
	// Map-Notify-Acks by result.
	Unsolicited, Retransmits, Unacknowledged uint64
	Acks                                     [numAckResults]uint64
	// Pushes counts the Map-Notifies of the te role's sets sent (first
	// sends; retransmissions count in Retransmits).
	Pushes uint64
	// Registrations is the number of EID-prefixes registered now.
	Registrations int
}

// Counters returns the current counters.
func (s *Server) Counters() Counters {
	var c Counters
	for i := range c.Registers {
		c.Registers[i] = s.counter.registers[i].Load()
	}
	c.Notifies = s.counter.notifies.Load()
	c.Expired = s.counter.expired.Load()
	c.Unsolicited = s.counter.unsolicited.Load()
	c.Retransmits = s.counter.retransmits.Load()
	c.Unacknowledged = s.counter.unacknowledged.Load()
	c.Pushes = s.counter.pushes.Load()
	for i := range c.Acks {
		c.Acks[i] = s.counter.acks[i].Load()
	}
	s.mu.RLock()
	c.Registrations = s.regs.Len()
	s.mu.RUnlock()
	return c
}
