package gateway

import (
	"fmt"
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

// TestTokenSeriesByDeployment: a team's token series are kept per
// deployment of one server's table; many deployments and another server
// sharing the catalog count in their own series all the same.
func TestTokenSeriesByDeployment(t *testing.T) {
	team := &catalog.Team{Team: config.Team{Name: "acme"}}
	a := &call{s: &Server{Deps: Deps{Metrics: telemetry.NewMetrics(prometheus.NewRegistry())}}, team: team}
	b := &call{s: &Server{Deps: Deps{Metrics: telemetry.NewMetrics(prometheus.NewRegistry())}}, team: team}
	deps := make([]string, 10)
	for i := range deps {
		deps[i] = fmt.Sprintf("d%d", i)
	}
	for range 3 {
		for _, d := range deps {
			a.tokenSeries(d).prompt.Add(1)
			a.tokenSeries(d).completion.Add(2)
		}
		b.tokenSeries("d0").prompt.Add(10)
	}
	for _, d := range deps {
		if p, c := a.s.Metrics.Tokens.WithLabelValues("acme", d, "prompt").Value(), a.s.Metrics.Tokens.WithLabelValues("acme", d, "completion").Value(); p != 3 || c != 6 {
			t.Errorf("%s: prompt %v completion %v, want 3 and 6", d, p, c)
		}
	}
	if p := b.s.Metrics.Tokens.WithLabelValues("acme", "d0", "prompt").Value(); p != 30 {
		t.Errorf("other server's d0 prompt %v, want 30", p)
	}
}
