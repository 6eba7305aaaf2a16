package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/telemetry"
)

// TestRequestSeriesFollowsLabels: the series a team keeps is used only for
// the same model and status of the same server's table; any other label
// set, or another server sharing the catalog, counts in its own series.
func TestRequestSeriesFollowsLabels(t *testing.T) {
	team := &catalog.Team{Team: config.Team{Name: "acme"}}
	a := &call{s: &Server{Deps: Deps{Metrics: telemetry.NewMetrics(prometheus.NewRegistry())}}, team: team}
	b := &call{s: &Server{Deps: Deps{Metrics: telemetry.NewMetrics(prometheus.NewRegistry())}}, team: team}
	for _, r := range []struct {
		cl     *call
		model  string
		status int
	}{{a, "m1", 200}, {a, "m1", 200}, {a, "m1", 429}, {a, "m2", 200}, {b, "m1", 200}, {a, "m1", 200}} {
		r.cl.requestSeries(r.model, "acme", r.status).Inc()
	}
	for _, w := range []struct {
		cl     *call
		model  string
		status string
		want   float64
	}{{a, "m1", "200", 3}, {a, "m1", "429", 1}, {a, "m2", "200", 1}, {b, "m1", "200", 1}, {b, "m2", "200", 0}} {
		if got := w.cl.s.Metrics.Requests.WithLabelValues(w.model, "acme", w.status).Value(); got != w.want {
			t.Errorf("%s %s: %v requests counted, want %v", w.model, w.status, got, w.want)
		}
	}
}
