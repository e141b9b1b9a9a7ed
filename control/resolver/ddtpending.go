package resolver

import (
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/internal/deadlines"
	"github.com/amptcp/amptcp/lisp"
)

// pending is an entry of the pending request table (RFC 8111 §7.3.1): an
// ITR's Map-Request the DDT resolver is following referrals for. It is
// known by the ITR's nonce, which the DDT Map-Requests keep and the
// Map-Referrals echo.
type pending struct {
	nonce   uint64
	raw     []byte // the ITR's ECM, sent on to each DDT node
	iid     uint32
	eid     netip.Addr
	asked   lisp.RequestRecord // the record as the ITR wrote it
	replyTo netip.AddrPort     // the ITR: RLOC and inner source port

	// The step: the referral set asked now (the root's, or a cached or
	// just received referral's), the tries of each of its RLOCs, the
	// map-servers of it that said MS-NOT-REGISTERED, and the RLOC asked
	// last, whose answer is due by deadline.
	step     *referral
	tries    map[netip.Addr]int
	notReg   map[netip.Addr]bool
	last     netip.Addr
	deadline time.Time

	referrals int  // referrals followed, the loop bound
	triedRoot bool // went back to the root after a stale referral
	deadlines.Slot
}

func (p *pending) Due() time.Time { return p.deadline }

// maxPending bounds the pending request table: beyond it, requests are
// dropped (and counted) rather than grow the resolver's memory.
const maxPending = 1 << 16

// nodeHolddown is how long an RLOC that did not answer is asked only
// when every other RLOC of its set has failed too; then it is tried
// again, as if up. maxDown bounds the RLOCs remembered as down.
const (
	nodeHolddown = 30 * time.Second
	maxDown      = 4096
)

var hashSeed = maphash.MakeSeed()

// next picks the RLOC of the step's set to ask next: the one asked the
// fewest times in this step, then one not known down, then the lowest
// priority value; among equals, a hash of the EID picks, so that the
// EIDs spread over a set. Map-servers that said MS-NOT-REGISTERED are
// not asked again. ok is false when every RLOC had its tries.
func (d *ddtResolver) next(p *pending, now time.Time) (netip.Addr, bool) {
	set := p.step.set
	start := int(maphash.Comparable(hashSeed, p.eid) % uint64(max(len(set), 1)))
	best, found := referralNode{}, false
	bestKey := [3]int{}
	for i := range set {
		n := set[(start+i)%len(set)]
		tries := p.tries[n.addr]
		if tries >= d.tries || p.notReg[n.addr] {
			continue
		}
		down := 0
		if d.isDown(n.addr, now) {
			down = 1
		}
		key := [3]int{tries, down, int(n.priority)}
		if !found || less(key, bestKey) {
			best, bestKey, found = n, key, true
		}
	}
	return best.addr, found
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// isDown reports whether addr failed to answer within the holddown.
func (d *ddtResolver) isDown(addr netip.Addr, now time.Time) bool {
	t, ok := d.down[addr]
	return ok && now.Sub(t) < nodeHolddown
}

// failed notes that addr did not answer.
func (d *ddtResolver) failed(addr netip.Addr, now time.Time) {
	if _, ok := d.down[addr]; ok || len(d.down) < maxDown {
		d.down[addr] = now
	}
}

// sweepDown forgets the RLOCs whose holddown is over.
func (d *ddtResolver) sweepDown(now time.Time) {
	for a, t := range d.down {
		if now.Sub(t) >= nodeHolddown {
			delete(d.down, a)
		}
	}
}
