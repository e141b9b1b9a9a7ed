package resolver

import "sync/atomic"

// DropReason is why the map-resolver did not answer a request.
type DropReason uint8

const (
	RateLimited    DropReason = iota // its source sent more than the rate limit
	NotMapRequest                    // the ECM carries another message
	NoRecords                        // the Map-Request asks for nothing
	NoITRRLOC                        // no ITR-RLOC to answer to
	UnsupportedEID                   // a record's EID is not an IPv4 or IPv6 address
	numDropReasons
)

var dropNames = [numDropReasons]string{
	RateLimited:    "rate-limited",
	NotMapRequest:  "not-map-request",
	NoRecords:      "no-records",
	NoITRRLOC:      "no-itr-rloc",
	UnsupportedEID: "unsupported-eid",
}

func (r DropReason) String() string { return dropNames[r] }

// DropReasons lists every reason, for exporting counters with all labels.
func DropReasons() []DropReason {
	r := make([]DropReason, numDropReasons)
	for i := range r {
		r[i] = DropReason(i)
	}
	return r
}

type counters struct {
	requests, replies, mappings, negatives, forwarded atomic.Uint64
	dropped                                           [numDropReasons]atomic.Uint64
}

func (c *counters) drop(r DropReason) { c.dropped[r].Add(1) }

// Counters is a snapshot of the map-resolver's counters.
type Counters struct {
	// Requests counts the ECM Map-Requests handled; Replies the Map-Replies
	// sent, whose records were Mappings (proxied) or Negatives; Forwarded
	// the requests passed on to an ETR; Dropped the rest, by reason.
	Requests, Replies, Mappings, Negatives, Forwarded uint64
	Dropped                                           [numDropReasons]uint64
}

// Counters returns the current counters.
func (r *Resolver) Counters() Counters {
	c := Counters{
		Requests:  r.counter.requests.Load(),
		Replies:   r.counter.replies.Load(),
		Mappings:  r.counter.mappings.Load(),
		Negatives: r.counter.negatives.Load(),
		Forwarded: r.counter.forwarded.Load(),
	}
	for i := range c.Dropped {
		c.Dropped[i] = r.counter.dropped[i].Load()
	}
	return c
}
