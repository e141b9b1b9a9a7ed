package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/amptcp/amptcp/cc"
)

// ccCollector exports the state of amptcp's congestion controls, read
// from the kernel when Prometheus scrapes.
type ccCollector struct {
	read func() (*cc.Status, error)
}

// CC returns a collector of the congestion controls' state that read
// returns (cc.ReadStatus).
func CC(read func() (*cc.Status, error)) prometheus.Collector { return ccCollector{read} }

func ccDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("amptcp_cc_"+name, help, append([]string{"cc"}, labels...), nil)
}

var (
	ccRegistered  = ccDesc("registered", "1 if sockets can select the congestion control.")
	ccLoaded      = ccDesc("loaded_versions", "Versions of its programs the kernel holds (replaced ones serve their connections until they close).")
	ccConnections = ccDesc("connections", "MPTCP connections coupled now.")
	ccSubflows    = ccDesc("subflows", "Subflows of the coupled connections.")
	ccAcks        = ccDesc("acks_total", "ACKs that could grow a window, by whether the subflow was coupled.", "coupled")
	ccLosses      = ccDesc("reductions_total", "Window reductions: losses, timeouts, ECN.")
	ccEntries     = ccDesc("entries_total", "Connection entries, by event: created, deleted (by the last subflow), swept (idle).", "event")
	ccUncoupled   = ccDesc("uncoupled_total", "Subflows left uncoupled, by reason: map_full, connection_full.", "reason")
	ccReadError   = prometheus.NewDesc("amptcp_cc_read_error", "1 if this scrape could not read all of the kernel's state.", nil, nil)
)

func (ccCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ccRegistered, ccLoaded, ccConnections, ccSubflows, ccAcks, ccLosses, ccEntries, ccUncoupled, ccReadError} {
		ch <- d
	}
}

func (c ccCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.read()
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(ccReadError, prometheus.GaugeValue, failed)
	if st == nil {
		return
	}
	for _, k := range st.Controls {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{k.Name}, labels...)...)
		}
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{k.Name}, labels...)...)
		}
		registered := 0.0
		if k.Registered {
			registered = 1
		}
		subflows := 0
		for _, conn := range k.Connections {
			subflows += len(conn.Subflows)
		}
		gauge(ccRegistered, registered)
		gauge(ccLoaded, float64(k.Loaded))
		gauge(ccConnections, float64(len(k.Connections)))
		gauge(ccSubflows, float64(subflows))
		n := k.Counters
		counter(ccAcks, n.CoupledAcks, "true")
		counter(ccAcks, n.Acks-min(n.Acks, n.CoupledAcks), "false")
		counter(ccLosses, n.Losses)
		counter(ccEntries, n.ConnsCreated, "created")
		counter(ccEntries, n.ConnsDeleted, "deleted")
		counter(ccEntries, n.Swept, "swept")
		counter(ccUncoupled, n.MapFull, "map_full")
		counter(ccUncoupled, n.SlotsFull, "connection_full")
	}
}
