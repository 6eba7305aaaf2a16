// Package telemetry owns what the gateway reports about itself (SPEC 12):
// the Prometheus metrics, registered on an injected registry with bounded
// labels (never a key, session id or prompt hash), and the audit log of one
// entry per request (a ring in memory, or a bounded Redis stream shared by
// the replicas). It imports prometheus and go-redis, never gin.
package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector of SPEC 12.1.
type Metrics struct {
	Requests        *CounterTable            // model, team, status
	RequestDuration *prometheus.HistogramVec // model
	Overhead        prometheus.Histogram     // gateway time excluding upstream
	Attempts        *prometheus.CounterVec   // deployment, class
	UpstreamLatency *prometheus.HistogramVec // deployment
	UpstreamTTFB    *prometheus.HistogramVec // deployment
	EdgeRejections  *CounterTable            // team, kind
	Tokens          *CounterTable            // team, deployment, direction
	Cost            *CounterTable            // team, deployment
	StreamErrors    *prometheus.CounterVec   // deployment

	SmartRequests    *prometheus.CounterVec   // alias, tier
	SmartEscalations *prometheus.CounterVec   // alias
	SmartScore       *prometheus.HistogramVec // alias

	Selections      *prometheus.CounterVec // model, deployment, strategy
	Rejections      *prometheus.CounterVec // reason
	Outcomes        *prometheus.CounterVec // deployment, class
	Cooldowns       *prometheus.CounterVec // deployment, trigger
	Probes          *prometheus.CounterVec // deployment, outcome
	SessionAffinity *prometheus.CounterVec // outcome
	LatencyEstimate *prometheus.GaugeVec   // deployment
	Fallbacks       *prometheus.CounterVec // primary, reason, target

	RedisUp       prometheus.Gauge
	RedisFallback *prometheus.CounterVec // component
	UsageDropped  prometheus.Counter
	AuditDropped  prometheus.Counter
	// UsageWriteErrors counts post-response writes of one team that Redis
	// rejected (SPEC 14).
	UsageWriteErrors prometheus.Counter
	// EdgeDropped counts the shared-state writes lost because a writer's
	// bound was reached, by kind: pins, releases, usage (the last also in
	// UsageDropped). Audit entries have AuditDropped.
	EdgeDropped *prometheus.CounterVec
	// BudgetAlerts counts budget alerts (a level's spend crossing
	// budget.alert_at, once per period), by level (SPEC 3.1).
	BudgetAlerts *prometheus.CounterVec
	// The response cache (SPEC 18): requests by public model and result
	// (hit, miss, bypass, coalesced), and what hits saved.
	CacheRequests    *prometheus.CounterVec
	CacheSavedTokens prometheus.Counter
	CacheSavedUSD    prometheus.Counter
	// CacheAlone counts coalescing followers that went on alone and
	// called the upstream themselves, by where their leader ran (node: this
	// one; cluster: another, through its lease) and why (leader_failed,
	// wait_ended, error): an operator tunes coalesce_wait or looks at
	// failing leaders from it (SPEC 18).
	CacheAlone *prometheus.CounterVec

	// NodeIDCollisions counts heartbeats that saw another live process
	// announcing this node's server.node_id (cluster.Heartbeat.OnCollision):
	// both are counted as live nodes, but their listings and health
	// snapshots overwrite each other (SPEC 9, 11).
	NodeIDCollisions prometheus.Counter

	// BodyBudgetRejected counts requests answered 503 because the node
	// already held server.max_inflight_body_bytes of request bodies (SPEC 14).
	BodyBudgetRejected prometheus.Counter
}

// teamTable is a per-team table and the index of its team label.
type teamTable struct {
	t     *CounterTable
	label int
}

func (m *Metrics) teamTables() [4]teamTable {
	return [4]teamTable{{m.Requests, 1}, {m.EdgeRejections, 0}, {m.Tokens, 0}, {m.Cost, 0}}
}

// TeamNames calls fn with the team of every per-team series (repeats
// possible).
func (m *Metrics) TeamNames(fn func(team string)) {
	for _, tt := range m.teamTables() {
		tt.t.Values(tt.label, fn)
	}
}

// ForgetTeams deletes every per-team series of the teams drop names (SPEC
// 16: a deleted team's series leave with it), one pass per table.
func (m *Metrics) ForgetTeams(drop func(team string) bool) {
	for _, tt := range m.teamTables() {
		tt.t.Forget(tt.label, drop)
	}
}

// ForgetDeployment drops the series of deployment id, deleted from the
// catalog: its attempts, latencies, stream errors, selections, outcomes,
// cooldowns, probes and latency estimate, so a deleted deployment shows no
// frozen estimate and admin churn does not grow the label set without
// bound. It returns how many series it dropped. (The per-team tokens and
// cost tables keep their rows: they are the team's spend.)
func (m *Metrics) ForgetDeployment(id string) int {
	l := prometheus.Labels{"deployment": id}
	n := 0
	for _, v := range [...]interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.Attempts, m.UpstreamLatency, m.UpstreamTTFB, m.StreamErrors, m.Selections,
		m.Outcomes, m.Cooldowns, m.Probes, m.LatencyEstimate,
	} {
		n += v.DeletePartialMatch(l)
	}
	return n
}

// Tables are the per-team tables (requests, edge rejections, tokens,
// cost). They are not registered on the registry: Handler writes them into
// /metrics series by series (exposition.go), and a caller that gathers the
// registry itself reads them here.
func (m *Metrics) Tables() []*CounterTable {
	return []*CounterTable{m.Requests, m.EdgeRejections, m.Tokens, m.Cost}
}

// NewMetrics creates the collectors and registers them, plus the Go and
// process collectors, on reg; the per-team tables stay off it (Tables).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "switchyard"
	latencyBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	m := &Metrics{
		Requests: NewCounterTable(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Client requests by public model, team and final HTTP status."}, "model", "team", "status"),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help: "Whole client request duration.", Buckets: latencyBuckets}, []string{"model"}),
		Overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "overhead_seconds",
			Help: "Time spent in the gateway itself, excluding upstream time.", Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .05}}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_attempts_total",
			Help: "Upstream attempts by deployment and outcome class."}, []string{"deployment", "class"}),
		UpstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_latency_seconds",
			Help: "Upstream attempt duration.", Buckets: latencyBuckets}, []string{"deployment"}),
		UpstreamTTFB: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_ttfb_seconds",
			Help: "Upstream time to first byte.", Buckets: latencyBuckets}, []string{"deployment"}),
		EdgeRejections: NewCounterTable(prometheus.CounterOpts{Namespace: ns, Name: "edge_rejections_total",
			Help: "Requests rejected at the edge by team and kind (rpm, tpm, parallel, budget)."}, "team", "kind"),
		Tokens: NewCounterTable(prometheus.CounterOpts{Namespace: ns, Name: "tokens_total",
			Help: "Tokens by team, deployment and direction (prompt, completion)."}, "team", "deployment", "direction"),
		Cost: NewCounterTable(prometheus.CounterOpts{Namespace: ns, Name: "cost_usd_total",
			Help: "Spend in USD by team and deployment."}, "team", "deployment"),
		StreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_errors_total",
			Help: "Streams that failed after the first byte reached the client."}, []string{"deployment"}),

		SmartRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "smartroute_requests_total",
			Help: "Smart-routed requests by alias and tier."}, []string{"alias", "tier"}),
		SmartEscalations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "smartroute_escalations_total",
			Help: "Session tier pins raised from easy to hard."}, []string{"alias"}),
		SmartScore: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "smartroute_score",
			Help: "Classifier scores by alias, to tune the threshold.", Buckets: []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 12}}, []string{"alias"}),

		Selections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_selections_total",
			Help: "Deployment selections by public model, deployment and strategy."}, []string{"model", "deployment", "strategy"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_rejections_total",
			Help: "Candidates skipped during selection, by reason."}, []string{"reason"}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_outcomes_total",
			Help: "Attempt outcomes fed back to routing, by deployment and class."}, []string{"deployment", "class"}),
		Cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_cooldowns_total",
			Help: "Cooldowns started, by deployment and trigger."}, []string{"deployment", "trigger"}),
		Probes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_probes_total",
			Help: "Recovery probes on cooling deployments, by deployment and outcome (success, failure, inconclusive)."}, []string{"deployment", "outcome"}),
		SessionAffinity: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "routing_session_affinity_total",
			Help: "Session deployment pins honored or released by a cooldown."}, []string{"outcome"}),
		LatencyEstimate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "routing_latency_estimate_seconds",
			Help: "Peak-EWMA latency estimate per deployment on this node."}, []string{"deployment"}),
		Fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fallbacks_total",
			Help: "Fallback models tried, by primary, reason and target."}, []string{"primary", "reason", "target"}),

		RedisUp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "redis_up",
			Help: "1 while the shared Redis answers, 0 in local fallback (or not configured)."}),
		RedisFallback: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "redis_fallback_total",
			Help: "Operations served locally because Redis was unavailable, by component."}, []string{"component"}),
		UsageDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "usage_dropped_total",
			Help: "Usage deltas that could not be written to Redis at all."}),
		AuditDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "audit_dropped_total",
			Help: "Audit entries that could not be stored."}),
		UsageWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "usage_write_errors_total",
			Help: "Post-response writes of one team that Redis rejected; the other teams' writes of the same call were applied."}),
		CacheRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "cache_requests_total",
			Help: "Cacheable requests by public model and result (hit, miss, bypass, coalesced)."}, []string{"model", "result"}),
		CacheSavedTokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cache_saved_tokens_total",
			Help: "Tokens the response cache's hits did not send upstream."}),
		CacheSavedUSD: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cache_saved_usd_total",
			Help: "USD the response cache's hits did not spend."}),
		CacheAlone: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "cache_followers_alone_total",
			Help: "Coalescing followers that called the upstream themselves, by where their leader ran (node, cluster) and why (leader_failed, wait_ended, error)."}, []string{"where", "reason"}),
		BudgetAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "budget_alerts_total",
			Help: "Budget alerts: a level's spend crossed budget.alert_at, once per period, by level (team, key, user)."}, []string{"level"}),
		EdgeDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "edge_dropped_total",
			Help: "Shared-state writes lost because a writer's bound was reached, by kind (pins, releases, usage; usage_folded: usage rows merged into the (other) user)."}, []string{"kind"}),

		NodeIDCollisions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "node_id_collisions_total",
			Help: "Heartbeats that saw another live process announcing this node's server.node_id; give every replica its own node_id."}),

		BodyBudgetRejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "body_budget_rejected_total",
			Help: "Requests answered 503 because the node held server.max_inflight_body_bytes of request bodies."}),
	}
	reg.MustRegister(
		m.RequestDuration, m.Overhead, m.Attempts, m.UpstreamLatency, m.UpstreamTTFB, m.StreamErrors,
		m.SmartRequests, m.SmartEscalations, m.SmartScore,
		m.Selections, m.Rejections, m.Outcomes, m.Cooldowns, m.Probes, m.SessionAffinity, m.LatencyEstimate, m.Fallbacks,
		m.RedisUp, m.RedisFallback, m.UsageDropped, m.AuditDropped, m.UsageWriteErrors, m.BudgetAlerts, m.CacheRequests, m.CacheSavedTokens, m.CacheSavedUSD, m.CacheAlone, m.EdgeDropped, m.NodeIDCollisions, m.BodyBudgetRejected,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, kind := range EdgeDropKinds {
		m.EdgeDropped.WithLabelValues(kind) // shown at 0 before the first loss
	}
	return m
}

// EdgeDropKinds are the kind labels of switchyard_edge_dropped_total.
// usage_folded counts usage-by-level rows whose end user (or key) was
// folded into "(other)" past a node's bound (SPEC 3.1, 9): not lost, merged.
var EdgeDropKinds = []string{"pins", "releases", "usage", "usage_folded"}
