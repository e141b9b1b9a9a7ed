// Package metrics exports amptcp's counters in the Prometheus format. The
// core packages count with plain methods; this is the one place that
// knows Prometheus.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Start serves /metrics on addr in the background, as Serve does, when
// addr is not empty; why it stops, if not for ctx, goes to log.
func Start(ctx context.Context, addr string, log *slog.Logger, cs ...prometheus.Collector) {
	if addr == "" {
		return
	}
	go func() {
		if err := Serve(ctx, addr, cs...); err != nil {
			log.Error("metrics stopped", "error", err)
		}
	}()
}

// Serve answers /metrics on addr with the collectors and the Go runtime's
// own metrics, until ctx is done.
func Serve(ctx context.Context, addr string, cs ...prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
