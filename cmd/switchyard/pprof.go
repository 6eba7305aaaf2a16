//go:build pprof

package main

// Built with -tags pprof, the binary serves net/http/pprof on the loopback
// address in $PPROF_ADDR (for example 127.0.0.1:6060), for the profiles
// and traces bench/overhead.sh's figures are explained with. Never in a
// release build: the default build has no such listener. Beside pprof,
// /debug/runtime-metrics lists every runtime/metrics value (the collector's
// scannable heap among them), one "name value" line each.

import (
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime/metrics"
)

func init() {
	addr := os.Getenv("PPROF_ADDR")
	if addr == "" {
		return
	}
	http.HandleFunc("/debug/runtime-metrics", serveRuntimeMetrics)
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			slog.Error("pprof listener", "addr", addr, "error", err)
		}
	}()
}

// serveRuntimeMetrics writes every scalar runtime/metrics value.
func serveRuntimeMetrics(w http.ResponseWriter, _ *http.Request) {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		case metrics.KindFloat64:
			fmt.Fprintf(w, "%s %g\n", s.Name, s.Value.Float64())
		}
	}
}
