package routing

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// Router is one node's routing core: the live state of every deployment,
// the registered strategies, the warm-cache memory, the clock and the seed.
// It is safe for concurrent use and takes no global lock on the selection
// path: deployment state is read through atomics, the strategy table is
// immutable, and each Plan draws from its own random source.
type Router struct {
	// Immutable after construction.
	cfg       config.Routing // with zero values of invalid knobs replaced by SPEC defaults
	rules     healthRules
	clock     Clock
	epoch     time.Time // tick 0; carries the monotonic reading of a real clock
	obs       Observer
	usage     UsageSource
	seed      uint64
	selectors map[string]Selector
	warm      *warmCache

	// Safe for concurrent use on their own.
	plans  atomic.Uint64 // plans started: the stream of each plan's random source
	states sync.Map      // deployment id -> *DeploymentState
}

// warmCapacity bounds the sessions the warm-cache memory holds on a node.
const warmCapacity = 1 << 16

// NewRouter returns a node's router. clock nil means SystemClock, obs nil
// NopObserver, usage nil counts nothing (quotas never bind; the gateway passes ratelimit's node-local or cluster-wide usage). seed seeds every random
// choice, so a seeded router with a fake clock is deterministic. Knobs whose
// zero value is invalid (cooldown_base, cooldown_max, failures_before_cooldown,
// ewma_decay, warm_cache_weight, warm_cache_ttl) fall back to the SPEC 13
// defaults, so a test can pass a partial config.Routing.
func NewRouter(cfg config.Routing, clock Clock, seed int64, obs Observer, usage UsageSource) *Router {
	cfg = withDefaults(cfg)
	if clock == nil {
		clock = SystemClock{}
	}
	if obs == nil {
		obs = NopObserver{}
	}
	if usage == nil {
		usage = nopUsage{}
	}
	r := &Router{
		cfg:   cfg,
		clock: clock,
		// An hour before now keeps every tick positive (0 means "never")
		// even if a test clock steps back a little.
		epoch: clock.Now().Add(-time.Hour),
		obs:   obs,
		usage: usage,
		seed:  uint64(seed),
		rules: healthRules{
			base:       int64(cfg.CooldownBase),
			max:        int64(cfg.CooldownMax),
			threshold:  cfg.FailuresBeforeCooldown,
			probeEvery: int64(cfg.ProbeInterval),
			decay:      float64(cfg.EWMADecay),
		},
		selectors: map[string]Selector{},
		warm:      newWarmCache(warmCapacity),
	}
	for name, build := range strategies {
		r.selectors[name] = build(cfg, usage)
	}
	return r
}

func withDefaults(c config.Routing) config.Routing {
	if c.CooldownBase <= 0 {
		c.CooldownBase = 5 * time.Second
	}
	if c.CooldownMax < c.CooldownBase {
		c.CooldownMax = max(5*time.Minute, c.CooldownBase)
	}
	if c.FailuresBeforeCooldown < 1 {
		c.FailuresBeforeCooldown = 3
	}
	if c.EWMADecay <= 0 {
		c.EWMADecay = 10 * time.Second
	}
	if c.WarmCacheWeight < 1 {
		c.WarmCacheWeight = 4
	}
	if c.WarmCacheTTL <= 0 {
		c.WarmCacheTTL = 5 * time.Minute
	}
	if c.ProbeInterval < 0 {
		c.ProbeInterval = 0
	}
	if _, ok := strategies[c.DefaultStrategy]; !ok {
		c.DefaultStrategy = "simple_shuffle"
	}
	return c
}

// tick maps a time onto the router's monotonic timeline (ns since epoch).
func (r *Router) tick(t time.Time) int64 { return int64(t.Sub(r.epoch)) }

// at maps a tick back to a time.
func (r *Router) at(tick int64) time.Time { return r.epoch.Add(time.Duration(tick)) }

// selector returns the model's strategy, the default strategy for an
// unknown name.
func (r *Router) selector(name string) (Selector, string) {
	if s, ok := r.selectors[name]; ok {
		return s, name
	}
	return r.selectors[r.cfg.DefaultStrategy], r.cfg.DefaultStrategy
}

// State returns the live state of a deployment, creating it on first use.
func (r *Router) State(id string) *DeploymentState {
	if v, ok := r.states.Load(id); ok {
		return v.(*DeploymentState)
	}
	v, _ := r.states.LoadOrStore(id, &DeploymentState{id: id, key: idKey(id)})
	return v.(*DeploymentState)
}

// Sync aligns the live state with a newly published snapshot: every
// deployment gets its state (so /admin/health lists it before its first
// request) and the state of deployments that are gone is dropped. State of
// a deployment that stays — edited, disabled, re-enabled — is kept. The
// gateway calls it after each catalog change; it is safe to skip.
func (r *Router) Sync(s *catalog.Snapshot) {
	for id := range s.Deployments {
		r.State(id)
	}
	r.states.Range(func(k, _ any) bool {
		if _, ok := s.Deployments[k.(string)]; !ok {
			r.states.Delete(k)
		}
		return true
	})
}

// Health returns every known deployment's state on this node at now, by id
// (GET /admin/health, SPEC 6).
func (r *Router) Health(now time.Time) []DeploymentHealth {
	t := r.tick(now)
	var out []DeploymentHealth
	r.states.Range(func(_, v any) bool {
		out = append(out, v.(*DeploymentState).snapshot(t, &r.rules, r.at))
		return true
	})
	slices.SortFunc(out, func(a, b DeploymentHealth) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// complete is the feedback of one attempt (CONVENTIONS 5): in-flight, the
// latency estimate, the streak and cooldown, the probe slot, the recent
// counts and the observer, from one call.
func (r *Router) complete(a *Attempt, o Outcome, now int64) {
	st := a.state
	if !a.stream {
		st.quietSince.Store(now)
		st.awaiting.Add(-1)
	}
	st.inflight.Add(-1)
	var (
		est     time.Duration
		trigger string
	)
	st.mu.Lock()
	st.recent.add(o.Class, now)
	if o.Class != ClassCanceled { // a client that went away never counts (SPEC 7.4)
		if sample := latencySample(o, a.stream); sample > 0 {
			est = st.estimate.observeLocked(sample, o.Class != ClassOK, now, r.rules.decay)
		}
		trigger = st.recordLocked(o.Class, o.RetryAfter, a.tick, now, &r.rules)
	}
	st.mu.Unlock()
	id := a.Deployment.ID
	if a.Probe {
		// Released after the outcome is applied, so a second probe cannot
		// slip in between a failed probe and its re-armed cooldown.
		st.releaseProbe()
		r.obs.OnProbe(id, probeOutcome(o.Class))
	}
	r.obs.OnOutcome(id, o.Class)
	if est > 0 {
		r.obs.OnLatencyEstimate(id, est.Seconds())
	}
	if trigger != "" {
		r.obs.OnCooldown(id, trigger)
	}
}

// probeOutcome is what a recovery probe's class says about the deployment
// (switchyard_routing_probes_total{outcome}).
func probeOutcome(c Class) string {
	switch {
	case c == ClassOK:
		return ProbeSuccess
	case c.Retryable(), c == ClassAuth, c == ClassNotFound:
		return ProbeFailure
	}
	return ProbeInconclusive
}

// latencySample is the attempt's latency sample: time to first byte for a
// stream that got one, the whole attempt otherwise.
func latencySample(o Outcome, stream bool) time.Duration {
	if stream && o.TTFB > 0 {
		return o.TTFB
	}
	if o.Latency > 0 {
		return o.Latency
	}
	return o.TTFB
}

// warmFor returns the deployment holding the session's warm prompt cache:
// the one that last served it within warm_cache_ttl, unless it has entered
// a cooldown since (SPEC 5.1: a deployment in cooldown loses the bonus).
// This node's memory answers first; otherwise shared is the deployment the
// shared session store holds for the session (another replica served it;
// SPEC 9 shares warm-cache pins), which counts while it is not cooling.
func (r *Router) warmFor(session, shared string, now int64) string {
	if session == "" {
		return ""
	}
	id, at := r.warm.get(session, now, int64(r.cfg.WarmCacheTTL))
	if id == "" {
		id, at = shared, 0
	}
	if id == "" {
		return ""
	}
	if v, ok := r.states.Load(id); ok {
		st := v.(*DeploymentState)
		if st.coolingAt(now) || (at > 0 && st.coolSince.Load() >= at) {
			return ""
		}
	}
	return id
}
