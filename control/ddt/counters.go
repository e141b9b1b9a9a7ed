package ddt

import (
	"sync/atomic"

	"github.com/amptcp/amptcp/lisp"
)

// DropReason is why a DDT Map-Request got no Map-Referral.
type DropReason uint8

const (
	NotMapRequest DropReason = iota // the ECM carries another message
	NoRecords                       // the Map-Request asks for nothing
	numDropReasons
)

var dropNames = [numDropReasons]string{NotMapRequest: "not-map-request", NoRecords: "no-records"}

func (r DropReason) String() string { return dropNames[r] }

// DropReasons lists every reason, for exporting counters with all labels.
func DropReasons() []DropReason {
	r := make([]DropReason, numDropReasons)
	for i := range r {
		r[i] = DropReason(i)
	}
	return r
}

// numActions is the number of referral actions RFC 8111 defines.
const numActions = int(lisp.ReferralNotAuthoritative) + 1

// Actions lists the referral actions, for exporting counters with all
// labels.
func Actions() []lisp.ReferralAction {
	a := make([]lisp.ReferralAction, numActions)
	for i := range a {
		a[i] = lisp.ReferralAction(i)
	}
	return a
}

type counters struct {
	requests, forwarded, proxied atomic.Uint64
	referrals                    [numActions]atomic.Uint64
	dropped                      [numDropReasons]atomic.Uint64
}

func (c *counters) referred(recs []lisp.ReferralRecord) {
	for _, r := range recs {
		c.referrals[r.Action].Add(1)
	}
}

// Counters is a snapshot of a DDT node's or DDT map-server's counters.
type Counters struct {
	// Requests counts the DDT Map-Requests handled; Referrals the records
	// of the Map-Referrals sent, by action; Dropped the requests not
	// answered, by reason. A map-server also counts the requests it
	// Forwarded to an ETR and those it answered itself (Proxied).
	Requests, Forwarded, Proxied uint64
	Referrals                    [numActions]uint64
	Dropped                      [numDropReasons]uint64
}

func (c *counters) snapshot() Counters {
	s := Counters{Requests: c.requests.Load(), Forwarded: c.forwarded.Load(), Proxied: c.proxied.Load()}
	for i := range s.Referrals {
		s.Referrals[i] = c.referrals[i].Load()
	}
	for i := range s.Dropped {
		s.Dropped[i] = c.dropped[i].Load()
	}
	return s
}

// Add sums two snapshots: a lispd that is both a DDT node and a DDT
// map-server reports them as one.
func (c Counters) Add(o Counters) Counters {
	c.Requests += o.Requests
	c.Forwarded += o.Forwarded
	c.Proxied += o.Proxied
	for i := range c.Referrals {
		c.Referrals[i] += o.Referrals[i]
	}
	for i := range c.Dropped {
		c.Dropped[i] += o.Dropped[i]
	}
	return c
}
