package mapserver

import "sync/atomic"

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
	registers [numReasons]atomic.Uint64
	notifies  atomic.Uint64
	expired   atomic.Uint64
}

func (c *counters) add(r Reason) { c.registers[r].Add(1) }

// Counters is a snapshot of the map-server's counters.
type Counters struct {
	// Registers counts Map-Registers by what became of them.
	Registers [numReasons]uint64
	// Notifies counts the Map-Notifies sent, Expired the ETR
	// registrations that timed out.
	Notifies, Expired uint64
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
	s.mu.RLock()
	c.Registrations = s.regs.Len()
	s.mu.RUnlock()
	return c
}
