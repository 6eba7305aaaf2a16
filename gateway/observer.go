package gateway

import (
	"switchyard/catalog"
	"switchyard/routing"
	"switchyard/telemetry"
)

// routingObserver turns routing's feedback into Prometheus metrics.
type routingObserver struct{ m *telemetry.Metrics }

func (o *routingObserver) OnSelect(model, dep, strategy string) {
	o.m.Selections.WithLabelValues(model, dep, strategy).Inc()
}
func (o *routingObserver) OnReject(reason string) { o.m.Rejections.WithLabelValues(reason).Inc() }
func (o *routingObserver) OnOutcome(dep string, c routing.Class) {
	o.m.Outcomes.WithLabelValues(dep, c.String()).Inc()
}
func (o *routingObserver) OnCooldown(dep, trigger string) {
	o.m.Cooldowns.WithLabelValues(dep, trigger).Inc()
}
func (o *routingObserver) OnFallback(primary string, reason catalog.Reason, target string) {
	o.m.Fallbacks.WithLabelValues(primary, string(reason), target).Inc()
}
func (o *routingObserver) OnSessionAffinity(outcome string) {
	o.m.SessionAffinity.WithLabelValues(outcome).Inc()
}
func (o *routingObserver) OnLatencyEstimate(dep string, seconds float64) {
	o.m.LatencyEstimate.WithLabelValues(dep).Set(seconds)
}

func (o *routingObserver) OnProbe(dep, outcome string) {
	o.m.Probes.WithLabelValues(dep, outcome).Inc()
}

var _ routing.Observer = (*routingObserver)(nil)
