package node

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/telemetry"
)

// scrape returns the value of each *_dropped_total series in reg, keyed
// "name{label=value}".
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasSuffix(f.GetName(), "_dropped_total") {
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// Lost pins and slot releases have their own counter
// (switchyard_edge_dropped_total{kind}); switchyard_usage_dropped_total
// keeps counting lost usage only, from the edge writer and from the
// deployment usage counter alike; lost audit entries stay in
// switchyard_audit_dropped_total. Usage rows folded into the "(other)"
// user are counted as kind usage_folded, not as lost usage.
func TestDroppedWritesByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs := &observer{m: telemetry.NewMetrics(reg), log: slog.Default()}
	zero := scrape(t, reg)
	for _, kind := range []string{"pins", "releases", "usage", "usage_folded"} {
		if v, ok := zero["switchyard_edge_dropped_total{kind="+kind+"}"]; !ok || v != 0 {
			t.Errorf("kind %s not shown at 0 before any loss: %v", kind, zero)
		}
	}
	obs.OnDropped("pins", 3)
	obs.OnDropped("releases", 2)
	obs.OnDropped("usage", 4)
	usageObserver{obs}.OnDropped(1) // ratelimit's deployment usage writer
	obs.OnDropped("audit", 7)
	obs.OnDropped("usage_folded", 2) // usage rows merged into "(other)": not lost usage
	got := scrape(t, reg)
	want := map[string]float64{
		"switchyard_edge_dropped_total{kind=pins}":         3,
		"switchyard_edge_dropped_total{kind=releases}":     2,
		"switchyard_edge_dropped_total{kind=usage}":        5,
		"switchyard_edge_dropped_total{kind=usage_folded}": 2,
		"switchyard_usage_dropped_total":                   5,
		"switchyard_audit_dropped_total":                   7,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("unexpected dropped series: %v", got)
	}
}
