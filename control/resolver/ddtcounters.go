package resolver

import (
	"sync/atomic"

	"github.com/amptcp/amptcp/lisp"
)

// RefusedReason is why the DDT resolver did not follow a Map-Referral.
type RefusedReason uint8

const (
	RefusedMalformed        RefusedReason = iota // does not decode
	RefusedUnsolicited                           // its nonce is that of no pending request
	RefusedUnexpectedSource                      // not from an RLOC the request was sent to
	RefusedNoRecords                             // no referral record
	RefusedUnsupportedEID                        // its EID is not an IPv4 or IPv6 prefix
	RefusedNotCovering                           // its prefix does not hold the EID asked
	RefusedEmptySet                              // a referral with no usable RLOC
	RefusedUnknownAction                         // an action RFC 8111 does not define
	RefusedLoop                                  // a referral no more specific than the one followed
	RefusedTooManyReferrals                      // the request followed max-referrals already
	numRefusedReasons
)

var refusedNames = [numRefusedReasons]string{
	RefusedMalformed:        "malformed",
	RefusedUnsolicited:      "unsolicited",
	RefusedUnexpectedSource: "unexpected-source",
	RefusedNoRecords:        "no-records",
	RefusedUnsupportedEID:   "unsupported-eid",
	RefusedNotCovering:      "not-covering",
	RefusedEmptySet:         "empty-referral-set",
	RefusedUnknownAction:    "unknown-action",
	RefusedLoop:             "loop",
	RefusedTooManyReferrals: "too-many-referrals",
}

func (r RefusedReason) String() string { return refusedNames[r] }

// RefusedReasons lists every reason, for exporting counters with all
// labels.
func RefusedReasons() []RefusedReason {
	r := make([]RefusedReason, numRefusedReasons)
	for i := range r {
		r[i] = RefusedReason(i)
	}
	return r
}

// numReferralActions is the number of actions RFC 8111 defines.
const numReferralActions = int(lisp.ReferralNotAuthoritative) + 1

type ddtCounters struct {
	requests, cachePositive, cacheNegative, duplicates, overload atomic.Uint64
	sent, timeouts, exhausted, resolved, negatives, stale        atomic.Uint64
	cacheFull, expired                                           atomic.Uint64
	referrals                                                    [numReferralActions]atomic.Uint64
	refused                                                      [numRefusedReasons]atomic.Uint64
}

// DDTCounters is a snapshot of the DDT resolver's counters.
type DDTCounters struct {
	// Requests counts the ITRs' requests resolved through DDT; of them,
	// CachePositive started at a cached referral rather than the root,
	// CacheNegative were answered from a cached negative referral;
	// Duplicates had the nonce of a pending request, Overload found the
	// pending request table full.
	Requests, CachePositive, CacheNegative, Duplicates, Overload uint64
	// Sent counts the DDT Map-Requests sent, tries included; Timeouts
	// the tries unanswered in time; Exhausted the requests given up after
	// every RLOC of a set had its tries; Resolved those a map-server
	// acknowledged (MS-ACK); Negatives the negative Map-Replies sent on
	// a referral received (those from the cache are CacheNegative);
	// Stale the cached referrals dropped because their node was not
	// authoritative any more.
	Sent, Timeouts, Exhausted, Resolved, Negatives, Stale uint64
	// Referrals counts the Map-Referrals followed, by action; Refused
	// those not followed, by reason.
	Referrals [numReferralActions]uint64
	Refused   [numRefusedReasons]uint64
	// CacheEntries and Pending are the sizes now; CacheFull counts the
	// referrals not cached for want of room, Expired those whose TTL ran
	// out.
	CacheEntries, Pending int
	CacheFull, Expired    uint64
}

func (c *ddtCounters) snapshot() DDTCounters {
	s := DDTCounters{
		Requests: c.requests.Load(), CachePositive: c.cachePositive.Load(), CacheNegative: c.cacheNegative.Load(),
		Duplicates: c.duplicates.Load(), Overload: c.overload.Load(),
		Sent: c.sent.Load(), Timeouts: c.timeouts.Load(), Exhausted: c.exhausted.Load(), Resolved: c.resolved.Load(),
		Negatives: c.negatives.Load(), Stale: c.stale.Load(), CacheFull: c.cacheFull.Load(), Expired: c.expired.Load(),
	}
	for i := range s.Referrals {
		s.Referrals[i] = c.referrals[i].Load()
	}
	for i := range s.Refused {
		s.Refused[i] = c.refused[i].Load()
	}
	return s
}
