package pce_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/metrics"
)

// TestScrapeLispdMetrics reads a row of the RTT matrix from what lispd's
// metrics endpoint serves: the gauges of its RLOC probing, by locator.
func TestScrapeLispdMetrics(t *testing.T) {
	counters := func() daemon.Counters {
		return daemon.Counters{Tunnel: &daemon.TunnelCounters{Locators: []daemon.LocatorGauge{
			{Address: "192.0.2.11", Up: true, RTT: 0.0421, MinRTT: 0.040},
			{Address: "192.0.2.12", Up: false, RTT: 0.080},
			{Address: "2001:db8::1", Up: true}, // not answered yet
		}}}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.Lispd(counters))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	rows, err := pce.Scrape(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]pce.Row{
		netip.MustParseAddr("192.0.2.11"):  {Addr: netip.MustParseAddr("192.0.2.11"), Up: true, RTT: 42100 * time.Microsecond, MinRTT: 40 * time.Millisecond},
		netip.MustParseAddr("192.0.2.12"):  {Addr: netip.MustParseAddr("192.0.2.12"), Up: false, RTT: 80 * time.Millisecond},
		netip.MustParseAddr("2001:db8::1"): {Addr: netip.MustParseAddr("2001:db8::1"), Up: true},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if w := want[r.Addr]; w != r {
			t.Errorf("row %+v, want %+v", r, w)
		}
	}

	// A server that is not lispd, or not there, is an error.
	bad := httptest.NewServer(http.NotFoundHandler())
	defer bad.Close()
	if _, err := pce.Scrape(context.Background(), bad.Client(), bad.URL); err == nil {
		t.Error("a 404 read as metrics")
	}
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{not metrics")) }))
	defer garbage.Close()
	if _, err := pce.Scrape(context.Background(), garbage.Client(), garbage.URL); err == nil {
		t.Error("garbage read as metrics")
	}
}
