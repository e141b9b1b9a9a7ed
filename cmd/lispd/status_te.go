package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/amptcp/amptcp/control/pce"
)

// writeTEStatus shows the te role: the overlay's routers, the RTT matrix,
// every pair's set of ELPs with its age and why it last changed, and the
// destinations' path slots.
func writeTEStatus(w io.Writer, te *pce.Status, now time.Time) {
	if te == nil {
		return
	}
	fmt.Fprintf(w, "\nte: %d routers, graph of %d links", len(te.Nodes), te.Edges)
	if !te.Graph.IsZero() {
		fmt.Fprintf(w, " built %s ago", now.Sub(te.Graph).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	for _, n := range te.Nodes {
		fmt.Fprintf(w, "  %s %s  %s", n.Role, n.Name, strings.Join(n.RLOCs, " "))
		if len(n.EIDs) > 0 {
			fmt.Fprintf(w, "  eids %s", strings.Join(n.EIDs, " "))
		}
		switch {
		case n.Error != "":
			fmt.Fprintf(w, "  cannot read %s: %s", n.Metrics, n.Error)
		case !n.Read.IsZero():
			fmt.Fprintf(w, "  read %s ago", now.Sub(n.Read).Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	if len(te.Matrix) > 0 {
		fmt.Fprintln(w, "\nRTT matrix (from -> to address: smoothed RTT, least RTT of 30s, which links are weighed by):")
		for _, l := range te.Matrix {
			to := l.To
			if to == "" {
				to = "(no node)"
			}
			fmt.Fprintf(w, "  %s -> %s %s  %s", l.From, to, l.Address, upDown(l.Up))
			if l.RTT > 0 {
				fmt.Fprintf(w, "  %.2fms, least %.2fms", l.RTT, l.MinRTT)
			}
			fmt.Fprintln(w)
		}
	}
	if len(te.Pairs) > 0 {
		fmt.Fprintln(w, "\nsets of ELPs:")
	}
	for _, p := range te.Pairs {
		fmt.Fprintf(w, "  %s -> %s: %d ELPs", p.Source, p.Destination, len(p.ELPs))
		if !p.Changed.IsZero() {
			fmt.Fprintf(w, ", for %s (%s; %d changes)", now.Sub(p.Changed).Round(time.Second), p.Reason, p.Changes)
		}
		if p.Pending > 0 {
			fmt.Fprintf(w, ", a better set found %d times in a row", p.Pending)
		}
		if p.Note != "" {
			fmt.Fprintf(w, ", %s", p.Note)
		}
		fmt.Fprintln(w)
		for _, l := range p.ELPs {
			fmt.Fprintf(w, "    path %d  %s  rtt %.2fms  (%s)\n", l.PathID, strings.Join(l.Hops, " -> "), l.RTT, strings.Join(l.Nodes, " > "))
		}
		for _, x := range p.Excluded {
			fmt.Fprintf(w, "    left out: %s\n", x)
		}
	}
	for _, d := range te.Destinations {
		fmt.Fprintf(w, "\npath slots of %s (the order of its Map-Replies):\n", d.Name)
		for _, s := range d.Slots {
			switch {
			case len(s.Hops) == 0:
				fmt.Fprintf(w, "  path %d  free\n", s.PathID)
			case s.Users == 0:
				fmt.Fprintf(w, "  path %d  %s  retired %s ago\n", s.PathID, strings.Join(s.Hops, " -> "), now.Sub(s.Retired).Round(time.Second))
			default:
				fmt.Fprintf(w, "  path %d  %s  %d sources\n", s.PathID, strings.Join(s.Hops, " -> "), s.Users)
			}
		}
		for _, p := range d.Pushed {
			fmt.Fprintf(w, "  sets of %s sent to its ETR %s ago\n", p.EID, now.Sub(p.At).Round(time.Second))
		}
	}
}
