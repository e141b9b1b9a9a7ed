package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/daemon"
)

// writeDDTStatus shows the DDT parts: the ddt-node role's delegations, and
// the map-resolver's root and referral cache with each RLOC's state.
func writeDDTStatus(w io.Writer, st *daemon.Status, now time.Time) {
	if len(st.DDTNode) > 0 {
		fmt.Fprintf(w, "\nddt-node: %d delegations\n", len(st.DDTNode))
		for _, d := range st.DDTNode {
			fmt.Fprintf(w, "  %s  %s\n", d.EID, d.Action)
			for _, r := range d.Referrals {
				fmt.Fprintf(w, "    referral %s\n", r)
			}
		}
	}
	if r := st.DDTResolver; r != nil {
		fmt.Fprintf(w, "\nddt: root %s; %d requests pending; referral cache: %d entries\n",
			rlocList(r.Root), r.Pending, len(r.Referrals))
		for _, e := range r.Referrals {
			fmt.Fprintf(w, "  %s  %s, from %s, expires in %s", e.EID, e.Action, e.Source, e.Expires.Sub(now).Round(time.Second))
			if len(e.Set) > 0 {
				fmt.Fprintf(w, "  %s", rlocList(e.Set))
			}
			fmt.Fprintln(w)
		}
		if r.Truncated {
			fmt.Fprintln(w, "  ... (lispd status -json has them all)")
		}
	}
}

// rlocList writes a referral set: "192.0.2.1 1/50 up, 192.0.2.2 1/50 down".
func rlocList(set []resolver.ReferralRLOC) string {
	parts := make([]string, len(set))
	for i, r := range set {
		parts[i] = fmt.Sprintf("%s %d/%d %s", r.Address, r.Priority, r.Weight, upDown(!r.Down))
	}
	return strings.Join(parts, ", ")
}

// writeDDTCounters adds the DDT counters to the counters' lines.
func writeDDTCounters(w io.Writer, c daemon.Counters) {
	if d := c.DDT; d != nil {
		fmt.Fprintf(w, "  ddt: map-requests %d, referrals sent %s, forwarded %d, proxied %d, dropped %s\n",
			d.Requests, joinCounts(d.Referrals), d.Forwarded, d.Proxied, joinCounts(d.Dropped))
	}
	if r := c.DDTResolver; r != nil {
		fmt.Fprintf(w, "  ddt resolver: requests %d (cache %d positive, %d negative), sent %d, timeouts %d, "+
			"given up %d, resolved %d, negative replies %d, stale referrals %d\n",
			r.Requests, r.CachePositive, r.CacheNegative, r.Sent, r.Timeouts, r.Exhausted, r.Resolved, r.Negatives, r.Stale)
		fmt.Fprintf(w, "    referrals followed %s; refused %s; cache %d entries, %d expired\n",
			joinCounts(r.Referrals), joinCounts(r.Refused), r.CacheEntries, r.Expired)
	}
}
