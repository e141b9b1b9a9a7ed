package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/daemon"
)

// lispd exports a lispd's counters, read when Prometheus scrapes.
type lispd struct {
	counters func() daemon.Counters
}

// Lispd returns a collector of the counters that counters returns (the
// daemon's Counters method).
func Lispd(counters func() daemon.Counters) prometheus.Collector { return lispd{counters} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("lispd_"+name, help, labels, nil)
}

var (
	received   = desc("packets_received_total", "Control datagrams received, by LISP message type.", "type")
	unexpected = desc("packets_unexpected_total", "Datagrams of a type no running role takes, by type.", "type")
	malformed  = desc("packets_malformed_total", "Datagrams that do not decode (Map-Registers are counted by lispd_map_registers_total).")
	oversized  = desc("packets_oversized_total", "Datagrams larger than the receive buffer.")
	sent       = desc("packets_sent_total", "Control datagrams sent.")
	sendErrors = desc("send_errors_total", "Datagrams the kernel refused to send.")
	unroutable = desc("packets_unroutable_total", "Answers to an address family lispd has no socket for.")
	byLoop     = desc("loop_packets_received_total", "Datagrams each serving loop received (lispd -cpus), the loops of each listen address in turn.", "loop")
	registers  = desc("map_registers_total", "Map-Registers by result: accepted, or the reason they were refused.", "result")
	notifies   = desc("map_notifies_sent_total", "Map-Notifies sent to acknowledge Map-Registers.")
	merged     = desc("merge_notifies_total", "Unsolicited Map-Notifies to the ETRs of merged registrations whose locators changed, by event: sent, retransmitted, unacknowledged (given up on).", "event")
	acks       = desc("map_notify_acks_total", "Map-Notify-Acks received, by result: accepted, or the reason they were refused.", "result")
	regs       = desc("registrations", "EID-prefixes registered now.")
	expired    = desc("registrations_expired_total", "ETR registrations that timed out.")
	requests   = desc("map_requests_total", "Encapsulated Map-Requests handled by the map-resolver.")
	replies    = desc("map_replies_sent_total", "Map-Replies the map-resolver sent.")
	records    = desc("map_reply_records_total", "Records of the Map-Replies sent, by kind: mapping (proxy) or negative.", "kind")
	forwarded  = desc("map_requests_forwarded_total", "Map-Requests forwarded to the ETR that answers them.")
	dropped    = desc("map_requests_dropped_total", "Map-Requests not answered, by reason.", "reason")

	// The tunnel roles (xtr, rtr).
	xtrRegisters  = desc("xtr_map_registers_sent_total", "Map-Registers the xtr sent, retries included.")
	xtrNotifies   = desc("xtr_map_notifies_total", "Map-Notifies the xtr received, by result: accepted, or the reason they were refused.", "result")
	xtrFailures   = desc("xtr_registration_failures_total", "Registration rounds that had no Map-Notify after all their tries.")
	xtrRequests   = desc("xtr_map_requests_total", "Map-Requests given to the xtr (forwarded, direct, probes), by result.", "result")
	xtrSMRs       = desc("xtr_smrs_sent_total", "Solicit-Map-Requests sent to ITRs when a mapping changed.")
	xtrBindings   = desc("xtr_bindings_total", "Stateful binding at the ETR, by event: bound, waited (for the subflow's SYN), ended (with the subflow), expired, rtr_unbound (an RTR asked for a subflow not bound: not answered).", "event")
	xtrBound      = desc("xtr_bindings", "Subflows bound to ELPs by the ETR now.")
	cacheStateful = desc("map_cache_stateful_subflows_total", "Stateful binding at the ITR, by event: reported (by the data plane), asked, pinned (to the ETR's choice), unbound (left where they were).", "event")
	cacheExpand   = desc("map_cache_expansions_total", "Paths with Lookup hops, by event: unexpanded (an EID being looked up, a loop, too deep), loop, reexpanded (an EID's mapping changed).", "event")
	cacheMisses   = desc("map_cache_misses_total", "Map-cache misses the data plane reported.")
	cacheRequests = desc("map_cache_map_requests_sent_total", "Map-Requests the map-cache sent to map-resolvers, retries included.")
	cacheFailed   = desc("map_cache_map_requests_failed_total", "Map-Requests that had no reply after all their tries.")
	cacheReplies  = desc("map_cache_map_replies_total", "Map-Replies the map-cache received, by result: accepted, or unsolicited (refused).", "result")
	cacheRecords  = desc("map_cache_records_total", "Records of accepted Map-Replies, by result: installed, or the reason they were not.", "result")
	cacheSMRs     = desc("map_cache_smrs_received_total", "Solicit-Map-Requests received.")
	cacheEntries  = desc("map_cache_entries", "Map-cache entries now, the site's own prefixes included.")
	cacheExpired  = desc("map_cache_expired_total", "Map-cache entries whose TTL ran out.")
	cacheHeld     = desc("map_cache_held_packets_total", "Packets the ITR held while their mappings were resolved, by result: held (all), released, dropped-eid-full, dropped-total-full, dropped-negative, dropped-unresolved, release-errors.", "result")
	cacheHeldNow  = desc("map_cache_held_packets", "Packets held now.")
	probesSent    = desc("probes_sent_total", "RLOC probes sent.")
	probesAnswer  = desc("probes_answered_total", "RLOC probes answered.")
	probesMissed  = desc("probes_missed_total", "RLOC probes left unanswered until the next.")
	probesBad     = desc("probe_replies_unmatched_total", "Probe replies that matched no probe in flight.")
	locatorUp     = desc("locator_up", "Whether a probed locator is up (1) or down (0).", "locator")
	locatorRTT    = desc("locator_rtt_seconds", "Smoothed round-trip time of RLOC probes to a locator.", "locator")
	locatorMinRTT = desc("locator_min_rtt_seconds", "Least round-trip time of the RLOC probes to a locator in the last 30 seconds.", "locator")
	dpPackets     = desc("dataplane_packets_total", "The data plane's packet counters, by name.", "counter")

	// The te role.
	teNodes        = desc("te_nodes", "Routers of the overlay the te role knows.")
	teEdges        = desc("te_links", "Links of the overlay graph: measured, up, with an RTT.")
	tePairs        = desc("te_pairs", "Active (source, destination) pairs.")
	teScrapes      = desc("te_reads_total", "Reads of the routers' RTTs, by result: ok or error.", "result")
	teComputations = desc("te_computations_total", "Sets of ELPs computed.")
	teChanges      = desc("te_set_changes_total", "Sets of ELPs adopted in place of the set in use.")
	teAnswers      = desc("te_answers_total", "Map-Replies carrying the te role's ELPs, by kind: masked (a source's set) or all.", "kind")
	teSMRs         = desc("te_smrs_sent_total", "Solicit-Map-Requests sent when a destination's ELPs changed.")
	tePushes       = desc("te_pushes_total", "Sets sent to the ETRs of prefixes that answer for themselves, per ETR and prefix.")
	teSlotsFull    = desc("te_slots_full_total", "Sets not adopted for want of a path slot.")
	teLinkRTT      = desc("te_link_rtt_seconds", "The RTT matrix: the smoothed RTT a router measures to an address of another.", "from", "to", "address")
	teLinkMinRTT   = desc("te_link_min_rtt_seconds", "The RTT matrix the te role weighs links by: the least RTT of the last 30 seconds.", "from", "to", "address")
	teLinkUp       = desc("te_link_up", "Whether a router finds an address of another up (1) or down (0).", "from", "to", "address")
	teSetELPs      = desc("te_set_elps", "ELPs in a pair's set.", "source", "destination")
	teSetAge       = desc("te_set_age_seconds", "Time since a pair's set last changed.", "source", "destination")
	teSetReason    = desc("te_set_change_info", "Why a pair's set last changed (always 1; the reason is the label).", "source", "destination", "reason")
)

func (l lispd) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{received, unexpected, malformed, oversized, sent, sendErrors, unroutable, byLoop,
		registers, notifies, merged, acks, regs, expired, requests, replies, records, forwarded, dropped,
		xtrRegisters, xtrNotifies, xtrFailures, xtrRequests, xtrSMRs, xtrBindings, xtrBound, cacheStateful, cacheExpand, cacheMisses, cacheRequests, cacheFailed,
		cacheReplies, cacheRecords, cacheSMRs, cacheEntries, cacheExpired, cacheHeld, cacheHeldNow, probesSent, probesAnswer, probesMissed,
		probesBad, locatorUp, locatorRTT, locatorMinRTT, dpPackets,
		teNodes, teEdges, tePairs, teScrapes, teComputations, teChanges, teAnswers, teSMRs, tePushes, teSlotsFull,
		teLinkRTT, teLinkMinRTT, teLinkUp, teSetELPs, teSetAge, teSetReason} {
		ch <- d
	}
	describeDDT(ch)
}

func (l lispd) Collect(ch chan<- prometheus.Metric) {
	c := l.counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	byLabel := func(d *prometheus.Desc, m map[string]uint64) {
		for k, v := range m {
			counter(d, v, k)
		}
	}
	byLabel(received, c.Received)
	byLabel(unexpected, c.Unexpected)
	counter(malformed, c.Malformed)
	counter(oversized, c.Oversized)
	counter(sent, c.Sent)
	counter(sendErrors, c.SendErrors)
	counter(unroutable, c.Unroutable)
	for i, n := range c.ByLoop {
		counter(byLoop, n, strconv.Itoa(i))
	}
	byLabel(registers, c.MapRegisters)
	counter(notifies, c.MapNotifies)
	byLabel(merged, c.MergeNotifies)
	byLabel(acks, c.NotifyAcks)
	ch <- prometheus.MustNewConstMetric(regs, prometheus.GaugeValue, float64(c.Registrations))
	counter(expired, c.Expired)
	counter(requests, c.MapRequests)
	counter(replies, c.MapReplies)
	counter(records, c.ReplyMappings, "mapping")
	counter(records, c.ReplyNegatives, "negative")
	counter(forwarded, c.Forwarded)
	byLabel(dropped, c.Dropped)
	collectDDT(ch, c, counter, byLabel)
	if t := c.Tunnel; t != nil {
		collectTunnel(ch, t, counter, byLabel)
	}
	if t := c.TE; t != nil {
		collectTE(ch, t, counter)
	}
}

// collectTE exports the te role's counters, the RTT matrix and the sets.
func collectTE(ch chan<- prometheus.Metric, t *pce.Counters, counter func(*prometheus.Desc, uint64, ...string)) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(teNodes, float64(t.Nodes))
	gauge(teEdges, float64(t.Edges))
	gauge(tePairs, float64(t.Pairs))
	counter(teScrapes, t.Scrapes, "ok")
	counter(teScrapes, t.ScrapeErrors, "error")
	counter(teComputations, t.Computations)
	counter(teChanges, t.Changes)
	counter(teAnswers, t.AnswersMasked, "masked")
	counter(teAnswers, t.AnswersAll, "all")
	counter(teSMRs, t.SMRs)
	counter(tePushes, t.Pushes)
	counter(teSlotsFull, t.SlotsFull)
	for _, l := range t.Matrix {
		up := 0.0
		if l.Up {
			up = 1
		}
		gauge(teLinkUp, up, l.From, l.To, l.Address)
		if l.RTT > 0 {
			gauge(teLinkRTT, l.RTT/1000, l.From, l.To, l.Address)
		}
		if l.MinRTT > 0 {
			gauge(teLinkMinRTT, l.MinRTT/1000, l.From, l.To, l.Address)
		}
	}
	for _, s := range t.Sets {
		gauge(teSetELPs, float64(s.ELPs), s.Source, s.Destination)
		gauge(teSetAge, s.Age.Seconds(), s.Source, s.Destination)
		if s.Reason != "" {
			gauge(teSetReason, 1, s.Source, s.Destination, s.Reason)
		}
	}
}

// collectTunnel exports the counters of the xtr and rtr roles, which a
// daemon of the mapping roles only does not have.
func collectTunnel(ch chan<- prometheus.Metric, t *daemon.TunnelCounters,
	counter func(*prometheus.Desc, uint64, ...string), byLabel func(*prometheus.Desc, map[string]uint64)) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(xtrRegisters, t.MapRegisters)
	byLabel(xtrNotifies, t.MapNotifies)
	counter(xtrFailures, t.RegisterFailures)
	byLabel(xtrRequests, t.RequestsAnswered)
	counter(xtrSMRs, t.SMRsSent)
	byLabel(xtrBindings, t.Bindings)
	gauge(xtrBound, float64(t.BindingsNow))
	byLabel(cacheStateful, t.StatefulSubflows)
	byLabel(cacheExpand, t.Expansions)
	counter(cacheMisses, t.Misses)
	counter(cacheRequests, t.MapRequests)
	counter(cacheFailed, t.RequestsFailed)
	byLabel(cacheReplies, t.MapReplies)
	byLabel(cacheRecords, t.MapReplyRecords)
	counter(cacheSMRs, t.SMRsReceived)
	gauge(cacheEntries, float64(t.Entries))
	counter(cacheExpired, t.Expired)
	byLabel(cacheHeld, t.Held)
	gauge(cacheHeldNow, float64(t.HeldNow))
	counter(probesSent, t.ProbesSent)
	counter(probesAnswer, t.ProbesAnswered)
	counter(probesMissed, t.ProbesMissed)
	counter(probesBad, t.ProbesUnmatched)
	for _, l := range t.Locators {
		up := 0.0
		if l.Up {
			up = 1
		}
		gauge(locatorUp, up, l.Address)
		if l.RTT > 0 {
			gauge(locatorRTT, l.RTT, l.Address)
		}
		if l.MinRTT > 0 {
			gauge(locatorMinRTT, l.MinRTT, l.Address)
		}
	}
	byLabel(dpPackets, t.Dataplane)
}
