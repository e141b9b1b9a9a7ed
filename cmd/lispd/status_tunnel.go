package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/daemon"
)

// writeTunnelStatus shows the tunnel roles: the xtr's mappings and its
// registration with each map-server, the map-cache with each path's hops,
// the probed locators and their RTTs, and the data plane's subflows and
// counters.
func writeTunnelStatus(w io.Writer, st *daemon.Status, now time.Time) {
	if x := st.XTR; x != nil {
		fmt.Fprintf(w, "\nxtr: %d mappings, %d ITRs asked lately\n", len(x.Mappings), x.ITRs)
		for _, m := range x.Mappings {
			fmt.Fprintf(w, "  mapping %s  ttl %s\n", m.EID, m.TTL)
			for _, l := range m.Locators {
				fmt.Fprintf(w, "    locator %s  %s  priority/weight %d/%d\n", l.Address, upDown(l.Reachable), l.Priority, l.Weight)
			}
			for _, set := range m.Sets {
				fmt.Fprintf(w, "    te set for %s, expires in %s\n", set.Source, set.Expires.Sub(now).Round(time.Second))
				for _, l := range set.Locators {
					fmt.Fprintf(w, "      locator %s  %s  priority/weight %d/%d\n", l.Address, upDown(l.Reachable), l.Priority, l.Weight)
				}
			}
		}
		if len(x.Bindings) > 0 {
			fmt.Fprintf(w, "  %d subflows bound to ELPs:\n", len(x.Bindings))
			for _, b := range x.Bindings {
				seen := "not seen yet"
				if b.Seen {
					seen = fmt.Sprintf("connection %#x", b.Connection)
				}
				fmt.Fprintf(w, "    %s  %s  %s, for %s, asked by %s\n", b.Flow, b.ELP, seen,
					now.Sub(b.Bound).Round(time.Second), strings.Join(b.Askers, ", "))
			}
		}
		for _, s := range x.MapServers {
			mode := "forward to this ETR"
			if s.ProxyReply {
				mode = "proxy-reply"
			}
			fmt.Fprintf(w, "  map-server %s  %s (%s), %d Map-Registers, %d Map-Notifies, %d failures",
				s.Address, s.State, mode, s.Registers, s.Notifies, s.Failures)
			if !s.LastNotify.IsZero() {
				fmt.Fprintf(w, ", last Map-Notify %s ago", now.Sub(s.LastNotify).Round(time.Second))
			}
			if s.FailuresInARow > 0 {
				fmt.Fprintf(w, ", last failure: %s", s.LastFailure)
			}
			if s.Unsolicited > 0 {
				fmt.Fprintf(w, ", %d Map-Notifies of merged locators acknowledged, the last %s ago",
					s.Unsolicited, now.Sub(s.LastUnsolicited).Round(time.Second))
			}
			fmt.Fprintln(w)
		}
	}
	if len(st.MapResolvers) > 0 {
		var rs []string
		for _, r := range st.MapResolvers {
			state := "up"
			if r.Down {
				state = fmt.Sprintf("down for %s", now.Sub(r.DownSince).Round(time.Second))
			}
			rs = append(rs, r.Address+" "+state)
		}
		fmt.Fprintf(w, "\nmap-resolvers (asked in this order, those down last): %s\n", strings.Join(rs, ", "))
	}
	if j := st.Join; j != nil {
		fmt.Fprintf(w, "\noverlay join: through %s", j)
		if j.Changes > 0 {
			fmt.Fprintf(w, " for %s (%s)", now.Sub(j.Changed).Round(time.Second), j.Reason)
		}
		fmt.Fprintln(w)
		for _, r := range j.RTRs {
			rtt := "down or not measured"
			if r.RTT > 0 {
				rtt = fmt.Sprintf("rtt %.2fms", r.RTT)
			}
			fmt.Fprintf(w, "  rtr %s  %s\n", r.Address, rtt)
		}
	}
	if st.MapCache != nil {
		fmt.Fprintf(w, "\nmap-cache: %d entries\n", len(st.MapCache))
		for _, e := range st.MapCache {
			writeEntry(w, e)
		}
	}
	if len(st.Probes) > 0 {
		fmt.Fprintf(w, "\nRLOC probes (this router's row of the RTT matrix):\n")
		for _, p := range st.Probes {
			fmt.Fprintf(w, "  %s  %s", p.Address, upDown(p.Up))
			if p.Answered > 0 {
				fmt.Fprintf(w, "  rtt %.2fms srtt %.2fms", p.RTT, p.SRTT)
			}
			fmt.Fprintf(w, "  %d/%d answered", p.Answered, p.Sent)
			if p.Misses > 0 {
				fmt.Fprintf(w, ", %d missed in a row", p.Misses)
			}
			fmt.Fprintln(w)
		}
	}
	if dp := st.Dataplane; dp != nil {
		fmt.Fprintf(w, "\ndata plane: %d subflows bound to paths", len(dp.Subflows))
		if len(dp.Counters) > 0 {
			fmt.Fprintf(w, "; counters %s", joinCounts(dp.Counters))
		}
		if dp.Error != "" {
			fmt.Fprintf(w, " (%s)", dp.Error)
		}
		fmt.Fprintln(w)
		for _, s := range dp.Subflows {
			pin := ""
			switch {
			case s.Pinned:
				pin = " (the ETR's)"
			case s.Asked:
				pin = " (its ETR asked)"
			}
			fmt.Fprintf(w, "  subflow %s -> %s  connection %#x  path %d%s  %d packets, %d bytes\n",
				s.Local, s.Remote, s.Connection, s.Path, pin, s.Packets, s.Bytes)
		}
		writeRestart(w, dp)
	}
	if r := st.LastReload; r != nil {
		fmt.Fprintf(w, "\nlast reload %s: %s\n", r.Time.Format(time.DateTime), reloadSummary(r))
	}
}

// writeRestart says where the data plane is kept across restarts, and
// what it took over from the lispd before.
func writeRestart(w io.Writer, dp *daemon.DataplaneStatus) {
	switch p := dp.Pinning; {
	case p.Path == "":
		fmt.Fprintf(w, "  restarts detach the data plane: %s\n", p.Error)
	case p.WhileRunning:
		fmt.Fprintf(w, "  pinned at %s, kept at every exit (keep-on-exit)\n", p.Path)
	default:
		fmt.Fprintf(w, "  kept across restarts at %s\n", p.Path)
	}
	if a := dp.Adoption; a != nil {
		fmt.Fprintf(w, "  adopted from lispd %s (pinned %s): %d map-cache entries, programs replaced on %d interfaces\n",
			a.From, a.Pinned.Format(time.DateTime), a.Entries, a.Links)
		for _, name := range slices.Sorted(maps.Keys(a.Refused)) {
			fmt.Fprintf(w, "    map %s started empty: %s\n", name, a.Refused[name])
		}
	}
}

// reloadSummary says what a reload did.
func reloadSummary(r *daemon.Reload) string {
	if r.Error != "" {
		return "nothing changed: " + r.Error
	}
	applied, restart := "nothing", "nothing"
	if len(r.Applied) > 0 {
		applied = strings.Join(r.Applied, ", ")
	}
	if len(r.NeedsRestart) > 0 {
		restart = strings.Join(r.NeedsRestart, ", ") + " (lispd restart)"
	}
	return fmt.Sprintf("applied %s; waiting for a restart: %s", applied, restart)
}

func writeEntry(w io.Writer, e mapcache.Entry) {
	eid := e.EIDPrefix
	if e.InstanceID != 0 {
		eid = fmt.Sprintf("[%d]%s", e.InstanceID, eid)
	}
	fmt.Fprintf(w, "  %s  %s", eid, e.Action)
	switch {
	case e.Local:
		fmt.Fprint(w, " (this site)")
	case e.Static:
		fmt.Fprint(w, " (static)")
	case e.Source == "adopted":
		fmt.Fprintf(w, ", adopted (%d paths), being asked for again, expires in %s", e.AdoptedPaths, time.Duration(e.TTLLeft)*time.Second)
	default:
		fmt.Fprintf(w, ", from %s, expires in %s", e.Source, time.Duration(e.TTLLeft)*time.Second)
	}
	fmt.Fprintln(w)
	for i, p := range e.Paths {
		hops := make([]string, len(p.Hops))
		for j, h := range p.Hops {
			var bits []string
			for _, b := range []struct {
				set  bool
				name string
			}{{h.Lookup, "L"}, {h.Probe, "P"}, {h.Strict, "S"}} {
				if b.set {
					bits = append(bits, b.name)
				}
			}
			hops[j] = h.Address
			if len(bits) > 0 {
				hops[j] += "(" + strings.Join(bits, ",") + ")"
			}
			if !h.Up {
				hops[j] += " down"
			} else if h.RTT > 0 {
				hops[j] += fmt.Sprintf(" %.2fms", h.RTT)
			}
		}
		fmt.Fprintf(w, "    path %d  %s  priority/weight %d/%d  %s", i, upDown(p.Up), p.Priority, p.Weight, strings.Join(hops, " -> "))
		if len(p.Expanded) > 0 {
			fmt.Fprintf(w, "  (takes %s)", strings.Join(p.Expanded, " -> "))
		}
		if p.Down != "" {
			fmt.Fprintf(w, "  (%s)", p.Down)
		}
		fmt.Fprintln(w)
	}
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}
