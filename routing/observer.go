package routing

import "switchyard/catalog"

// Observer receives routing's feedback; the gateway implements it with the
// Prometheus metrics of SPEC 12.1 (switchyard_routing_*). Every method is
// called synchronously on the request path, never with a lock held, and must
// be cheap and safe for concurrent use. Label values are bounded: deployment
// ids, model names, strategies and the constants below, never a session key.
type Observer interface {
	// OnSelect reports a deployment picked for an attempt and how: the
	// model's strategy, or SelectSession, SelectProbe, SelectLastResort.
	OnSelect(model, deployment, strategy string)
	// OnReject reports a deployment (or, for RejectExhausted, a pool) left
	// out of a selection: RejectCooldown, RejectQuota, RejectProfile,
	// RejectExhausted. A deployment is reported at most once per request and
	// reason.
	OnReject(reason string)
	// OnOutcome reports the class of every completed attempt.
	OnOutcome(deployment string, class Class)
	// OnCooldown reports a cooldown starting (or re-armed by a failed probe):
	// TriggerRateLimited, TriggerAuth or TriggerFailures.
	OnCooldown(deployment, trigger string)
	// OnFallback reports the first attempt on a fallback model.
	OnFallback(primary string, reason catalog.Reason, target string)
	// OnSessionAffinity reports what became of a session's deployment pin on
	// the request's first attempt: AffinityHonored or AffinityReleased.
	OnSessionAffinity(outcome string)
	// OnLatencyEstimate reports a deployment's new latency estimate.
	OnLatencyEstimate(deployment string, seconds float64)
	// OnProbe reports a completed recovery probe (SPEC 6): ProbeSuccess
	// (the cooldown ended), ProbeFailure (it was re-armed; the request
	// failed over) or ProbeInconclusive (the client went away, or an
	// outcome that says nothing about health such as a context-window
	// error).
	OnProbe(deployment, outcome string)
}

// Rejection reasons (switchyard_routing_rejections_total{reason}).
const (
	RejectCooldown  = "cooldown"  // the deployment is cooling down (SPEC 6)
	RejectQuota     = "quota"     // the deployment is over its own RPM/TPM quota
	RejectProfile   = "profile"   // the deployment cannot serve the request's profile (SPEC 7.5)
	RejectExhausted = "exhausted" // a whole pool had nothing left to try
)

// Cooldown triggers (switchyard_routing_cooldowns_total{trigger}).
const (
	TriggerRateLimited = "rate_limited" // a 429
	TriggerAuth        = "auth"         // 401, 403 or 404
	TriggerFailures    = "failures"     // failures_before_cooldown 5xx/timeouts/network errors in a row
)

// Session affinity outcomes (switchyard_routing_session_affinity_total{outcome}).
const (
	AffinityHonored  = "honored"
	AffinityReleased = "released"
)

// Recovery probe outcomes (switchyard_routing_probes_total{outcome}).
const (
	ProbeSuccess      = "success"
	ProbeFailure      = "failure"
	ProbeInconclusive = "inconclusive"
)

// Selection labels besides the strategy names.
const (
	SelectSession    = "session"     // a session's deployment pin, honored
	SelectProbe      = "probe"       // a recovery probe on a cooling deployment
	SelectLastResort = "last_resort" // the one attempt when everything is cooling down
)

// NopObserver discards everything.
type NopObserver struct{}

// OnSelect does nothing.
func (NopObserver) OnSelect(string, string, string) {}

// OnReject does nothing.
func (NopObserver) OnReject(string) {}

// OnOutcome does nothing.
func (NopObserver) OnOutcome(string, Class) {}

// OnCooldown does nothing.
func (NopObserver) OnCooldown(string, string) {}

// OnFallback does nothing.
func (NopObserver) OnFallback(string, catalog.Reason, string) {}

// OnSessionAffinity does nothing.
func (NopObserver) OnSessionAffinity(string) {}

// OnLatencyEstimate does nothing.
func (NopObserver) OnLatencyEstimate(string, float64) {}

// OnProbe does nothing.
func (NopObserver) OnProbe(string, string) {}

var _ Observer = NopObserver{}
