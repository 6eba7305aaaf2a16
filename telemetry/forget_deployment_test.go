package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestForgetDeployment: a deleted deployment's series go (its latency
// estimate stayed frozen in /metrics, and every deployment ever created
// through the admin API kept its label values); another's stay.
func TestForgetDeployment(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, d := range []string{"d1", "d2"} {
		m.Attempts.WithLabelValues(d, "ok").Inc()
		m.UpstreamLatency.WithLabelValues(d).Observe(0.1)
		m.UpstreamTTFB.WithLabelValues(d).Observe(0.05)
		m.Selections.WithLabelValues("m", d, "shuffle").Inc()
		m.Outcomes.WithLabelValues(d, "ok").Inc()
		m.Cooldowns.WithLabelValues(d, "429").Inc()
		m.LatencyEstimate.WithLabelValues(d).Set(0.2)
	}
	series := func() map[string]int {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "deployment" {
						out[l.GetValue()]++
					}
				}
			}
		}
		return out
	}
	if before := series(); before["d1"] != 7 || before["d2"] != 7 {
		t.Fatalf("series before %v", before)
	}
	if n := m.ForgetDeployment("d1"); n != 7 {
		t.Fatalf("dropped %d series, want 7", n)
	}
	if after := series(); after["d1"] != 0 || after["d2"] != 7 {
		t.Fatalf("series after %v, want d2's 7 alone", after)
	}
}
