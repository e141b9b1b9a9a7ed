package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
)

// runStatus shows what a running lispd holds: its sites, the prefixes
// registered with their RLOCs and ELPs, who registered them and when; its
// DDT delegations and referral cache; for
// the tunnel roles its own mappings and registrations, its map-cache, the
// locators it probes and its data plane; and its counters.
func runStatus(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lispd status", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("socket", config.DefaultControlSocket, "lispd's control socket")
	asJSON := flags.Bool("json", false, "print the status as JSON")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: lispd status [-socket PATH] [-json]

Shows what a running lispd holds: its roles, the sites and registrations
of a map-server, the mappings, map-cache, probed locators and data plane
of a tunnel router, and its counters.

`)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	st, err := daemon.QueryStatus(*socket)
	if err != nil {
		fmt.Fprintf(stderr, "lispd status: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return 0
	}
	writeStatus(stdout, st, time.Now())
	return 0
}

func writeStatus(w io.Writer, st *daemon.Status, now time.Time) {
	loops := "1 loop"
	if st.Loops > 1 {
		loops = fmt.Sprintf("%d loops", st.Loops)
	}
	fmt.Fprintf(w, "lispd %s, up %s, roles %v, listening on %s (%s each)\n",
		st.Version, now.Sub(st.Started).Round(time.Second), st.Roles, strings.Join(st.Listen, " "), loops)
	if ms := st.MapServer; ms != nil {
		for _, site := range ms.Sites {
			fmt.Fprintf(w, "\nsite %s (%s): %d registered\n", site.Name, strings.Join(site.Prefixes, ", "), len(site.Registrations))
			for _, r := range site.Registrations {
				mode := "forward to ETR"
				if r.Proxy {
					mode = "proxy-reply"
				}
				fmt.Fprintf(w, "  %s  %s\n", r.EID, mode)
				for _, l := range r.Locators {
					state := "down"
					if l.Reachable {
						state = "up"
					}
					fmt.Fprintf(w, "    locator %s  %s  priority/weight %d/%d\n", l.Address, state, l.Priority, l.Weight)
				}
				for _, e := range r.ETRs {
					fmt.Fprintf(w, "    registered by %s", e.Source)
					if e.XTRID != "" {
						fmt.Fprintf(w, " xtr-id %s site-id %d", e.XTRID, e.SiteID)
					}
					if e.Merge {
						fmt.Fprint(w, " (merge)")
					}
					fmt.Fprintf(w, ", first %s, last %s, %d Map-Registers, expires in %s",
						e.First.Format(time.DateTime), e.Last.Format(time.DateTime), e.Registers,
						e.Expires.Sub(now).Round(time.Second))
					if n := e.Unacknowledged; n != nil {
						fmt.Fprintf(w, ", Map-Notify %s of the merged locators unacknowledged after %d sends", n.Nonce, n.Sends)
					}
					fmt.Fprintln(w)
				}
			}
		}
	}
	writeDDTStatus(w, st, now)
	writeTunnelStatus(w, st, now)
	writeTEStatus(w, st.TE, now)
	c := st.Counters
	fmt.Fprintf(w, "\ncounters: received %s; malformed %d, sent %d\n", joinCounts(c.Received), c.Malformed, c.Sent)
	if c.MapRegisters != nil {
		fmt.Fprintf(w, "  map-registers %s; map-notifies %d; registrations %d, expired %d\n",
			joinCounts(c.MapRegisters), c.MapNotifies, c.Registrations, c.Expired)
		fmt.Fprintf(w, "  map-notifies of merged locators %s; map-notify-acks %s\n",
			joinCounts(c.MergeNotifies), joinCounts(c.NotifyAcks))
	}
	if c.Dropped != nil {
		fmt.Fprintf(w, "  map-requests %d: replies %d (%d mappings, %d negative), forwarded %d, dropped %s\n",
			c.MapRequests, c.MapReplies, c.ReplyMappings, c.ReplyNegatives, c.Forwarded, joinCounts(c.Dropped))
	}
	writeDDTCounters(w, c)
	if t := c.Tunnel; t != nil {
		fmt.Fprintf(w, "  xtr: map-registers %d, map-notifies %s, failures %d; map-requests received %s; smrs sent %d\n",
			t.MapRegisters, joinCounts(t.MapNotifies), t.RegisterFailures, joinCounts(t.RequestsAnswered), t.SMRsSent)
		fmt.Fprintf(w, "  map-cache: misses %d, map-requests %d (%d failed), map-replies %s, records %s, smrs %d, expired %d\n",
			t.Misses, t.MapRequests, t.RequestsFailed, joinCounts(t.MapReplies), joinCounts(t.MapReplyRecords), t.SMRsReceived, t.Expired)
		if t.Held["held"] > 0 {
			fmt.Fprintf(w, "  held packets: %s; now %d\n", joinCounts(t.Held), t.HeldNow)
		}
		fmt.Fprintf(w, "  probes: sent %d, answered %d, missed %d, unmatched replies %d\n",
			t.ProbesSent, t.ProbesAnswered, t.ProbesMissed, t.ProbesUnmatched)
		if n := sumCounts(t.Bindings) + sumCounts(t.StatefulSubflows) + sumCounts(t.Expansions); n > 0 {
			fmt.Fprintf(w, "  stateful binding: as ETR %s (%d now), as ITR %s; multi-layer paths %s\n",
				joinCounts(t.Bindings), t.BindingsNow, joinCounts(t.StatefulSubflows), joinCounts(t.Expansions))
		}
	}
	if t := c.TE; t != nil {
		fmt.Fprintf(w, "  te: reads %d (%d failed), sets computed %d, changed %d; answers %d with a source's set, %d with every ELP; smrs sent %d; sets sent to ETRs %d\n",
			t.Scrapes+t.ScrapeErrors, t.ScrapeErrors, t.Computations, t.Changes, t.AnswersMasked, t.AnswersAll, t.SMRs, t.Pushes)
	}
}

func sumCounts(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// joinCounts writes non-zero counts as "a 1, b 2", sorted.
func joinCounts(m map[string]uint64) string {
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
