package resolver

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// referral is an entry of the referral cache (RFC 8111 §7.3): what a DDT
// node or map-server said of a prefix, for the record's TTL. Positive
// entries (NODE-REFERRAL, MS-REFERRAL, MS-ACK) hold the referral set to
// ask next time; negative ones (DELEGATION-HOLE, MS-NOT-REGISTERED) are
// answered from the cache with a negative Map-Reply until they expire.
// The root is an entry too, configured and never expiring.
type referral struct {
	eid     mapping.EID
	root    bool
	action  lisp.ReferralAction
	set     []referralNode
	source  netip.Addr // who sent it; invalid for the root
	expires time.Time
	deadlines.Slot
}

// referralNode is an RLOC of a referral set.
type referralNode struct {
	addr             netip.Addr
	priority, weight uint8
}

func (r *referral) Due() time.Time { return r.expires }

// negative reports whether the entry says there is nothing to find.
func (r *referral) negative() bool {
	return r.action == lisp.ReferralDelegationHole || r.action == lisp.ReferralMSNotRegistered
}

// toMapServers reports whether the entry's set are map-servers, which
// DDT Map-Requests reach with the M bit set.
func (r *referral) toMapServers() bool {
	return r.action == lisp.ReferralMS || r.action == lisp.ReferralMSAck
}

// referralCache holds the referrals by extended prefix, longest match
// first, and expires them. The DDT resolver's lock guards it.
type referralCache struct {
	table  *mapping.Table[*referral]
	expiry deadlines.Queue[*referral]
	max    int
}

func newReferralCache(max int) *referralCache {
	return &referralCache{table: mapping.NewTable[*referral](), max: max}
}

// lookup returns the longest unexpired entry that covers the EID.
func (c *referralCache) lookup(iid uint32, ip netip.Addr, now time.Time) (*referral, bool) {
	for e := mapping.HostEID(iid, ip); ; {
		covering, r, ok := c.table.Covering(e)
		if !ok {
			return nil, false
		}
		if now.Before(r.expires) {
			return r, true
		}
		// Expired but not yet swept: look at the shorter prefixes.
		if covering.Prefix.Bits() == 0 {
			return nil, false
		}
		p, _ := covering.Prefix.Addr().Prefix(covering.Prefix.Bits() - 1)
		e = mapping.EID{IID: iid, Prefix: p}
	}
}

// put adds or replaces the entry of r's prefix; false when the cache is
// full.
func (c *referralCache) put(r *referral) bool {
	if old, ok := c.table.Get(r.eid); ok {
		c.expiry.Remove(old)
	} else if c.table.Len() >= c.max {
		return false
	}
	c.table.Insert(r.eid, r)
	c.expiry.Schedule(r)
	return true
}

// remove forgets the entry of eid if it is r.
func (c *referralCache) remove(r *referral) {
	if cur, ok := c.table.Get(r.eid); ok && cur == r {
		c.table.Delete(r.eid)
		c.expiry.Remove(r)
	}
}

// expire drops the entries whose TTL ran out and returns how many.
func (c *referralCache) expire(now time.Time) int {
	n := 0
	for {
		r, ok := c.expiry.Due(now)
		if !ok {
			return n
		}
		c.table.Delete(r.eid)
		n++
	}
}

// nodesOf reads the usable referral RLOCs of a record: IP addresses,
// without duplicates.
func nodesOf(locs []lisp.Locator) []referralNode {
	var out []referralNode
	for _, l := range locs {
		a := l.Address.IP().Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		dup := false
		for _, n := range out {
			dup = dup || n.addr == a
		}
		if !dup {
			out = append(out, referralNode{addr: a, priority: l.Priority, weight: l.Weight})
		}
	}
	return out
}
