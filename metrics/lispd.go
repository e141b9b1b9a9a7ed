package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

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
	registers  = desc("map_registers_total", "Map-Registers by result: accepted, or the reason they were refused.", "result")
	notifies   = desc("map_notifies_sent_total", "Map-Notifies sent to acknowledge Map-Registers.")
	regs       = desc("registrations", "EID-prefixes registered now.")
	expired    = desc("registrations_expired_total", "ETR registrations that timed out.")
	requests   = desc("map_requests_total", "Encapsulated Map-Requests handled by the map-resolver.")
	replies    = desc("map_replies_sent_total", "Map-Replies the map-resolver sent.")
	records    = desc("map_reply_records_total", "Records of the Map-Replies sent, by kind: mapping (proxy) or negative.", "kind")
	forwarded  = desc("map_requests_forwarded_total", "Map-Requests forwarded to the ETR that answers them.")
	dropped    = desc("map_requests_dropped_total", "Map-Requests not answered, by reason.", "reason")
)

func (l lispd) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{received, unexpected, malformed, oversized, sent, sendErrors, unroutable,
		registers, notifies, regs, expired, requests, replies, records, forwarded, dropped} {
		ch <- d
	}
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
	byLabel(registers, c.MapRegisters)
	counter(notifies, c.MapNotifies)
	ch <- prometheus.MustNewConstMetric(regs, prometheus.GaugeValue, float64(c.Registrations))
	counter(expired, c.Expired)
	counter(requests, c.MapRequests)
	counter(replies, c.MapReplies)
	counter(records, c.ReplyMappings, "mapping")
	counter(records, c.ReplyNegatives, "negative")
	counter(forwarded, c.Forwarded)
	byLabel(dropped, c.Dropped)
}
