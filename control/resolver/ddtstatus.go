package resolver

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/amptcp/amptcp/control"
)

// HandleReferral takes a Map-Referral that arrived from src, for the DDT
// resolution of a pending request; without DDT it is refused as
// unsolicited.
func (r *Resolver) HandleReferral(raw []byte, src netip.AddrPort, out *control.Outbox) {
	if r.ddt == nil {
		return
	}
	r.ddt.HandleReferral(raw, src, out)
}

// HasDDT reports whether the resolver resolves through the DDT.
func (r *Resolver) HasDDT() bool { return r.ddt != nil }

// Run retries late DDT Map-Requests and expires the referral cache until
// ctx is done; without DDT it returns at once.
func (r *Resolver) Run(ctx context.Context) {
	if r.ddt == nil {
		return
	}
	t := time.NewTicker(min(max(r.ddt.timeout/4, time.Millisecond), 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.ddt.Tick()
		}
	}
}

// SetClock replaces time.Now in the DDT resolution, for tests of
// timeouts and expiry.
func (r *Resolver) SetClock(now func() time.Time) {
	if r.ddt != nil {
		r.ddt.now = now
	}
}

// DDTCounters returns the DDT resolver's counters, or false without DDT.
func (r *Resolver) DDTCounters() (DDTCounters, bool) {
	if r.ddt == nil {
		return DDTCounters{}, false
	}
	c := r.ddt.counter.snapshot()
	r.ddt.mu.Lock()
	c.CacheEntries, c.Pending = r.ddt.cache.table.Len(), len(r.ddt.pending)
	r.ddt.mu.Unlock()
	return c, true
}

// DDTStatus is what `lispd status` shows of the DDT resolution: the
// root, the RLOCs that did not answer lately, the requests pending and
// the referral cache.
type DDTStatus struct {
	Root      []ReferralRLOC  `json:"root"`
	Pending   int             `json:"pending"`
	Referrals []ReferralEntry `json:"referrals"`
	// Truncated says that the cache holds more entries than Referrals
	// shows (the first maxStatusEntries, by prefix).
	Truncated bool `json:"truncated,omitempty"`
}

// ReferralEntry is an entry of the referral cache.
type ReferralEntry struct {
	EID     string         `json:"eid"`
	Action  string         `json:"action"`
	Source  string         `json:"source"`
	Expires time.Time      `json:"expires"`
	Set     []ReferralRLOC `json:"set,omitempty"`
}

// ReferralRLOC is an RLOC of a referral set.
type ReferralRLOC struct {
	Address  string `json:"address"`
	Priority uint8  `json:"priority"`
	Weight   uint8  `json:"weight"`
	// Down says it did not answer lately: it is asked last.
	Down bool `json:"down"`
}

const maxStatusEntries = 1000

// DDTStatus returns a snapshot of the DDT resolution, or nil without
// DDT.
func (r *Resolver) DDTStatus() *DDTStatus {
	d := r.ddt
	if d == nil {
		return nil
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	st := &DDTStatus{Root: d.rlocs(d.root.set, now), Pending: len(d.pending)}
	for e, ref := range d.cache.table.All() {
		st.Referrals = append(st.Referrals, ReferralEntry{EID: e.String(), Action: ref.action.String(),
			Source: ref.source.String(), Expires: ref.expires, Set: d.rlocs(ref.set, now)})
	}
	slices.SortFunc(st.Referrals, func(a, b ReferralEntry) int { return cmp.Compare(a.EID, b.EID) })
	if len(st.Referrals) > maxStatusEntries {
		st.Referrals, st.Truncated = st.Referrals[:maxStatusEntries], true
	}
	return st
}

func (d *ddtResolver) rlocs(set []referralNode, now time.Time) []ReferralRLOC {
	out := make([]ReferralRLOC, len(set))
	for i, n := range set {
		out[i] = ReferralRLOC{Address: n.addr.String(), Priority: n.priority, Weight: n.weight, Down: d.isDown(n.addr, now)}
	}
	return out
}
