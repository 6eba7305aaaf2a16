package routing

import (
	"fmt"
	"slices"
	"strings"
	"switchyard/internal/fakeclock"
	"sync"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/ratelimit"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testConfig is the SPEC 13 routing defaults.
func testConfig() config.Routing {
	return config.Routing{
		DefaultStrategy:        "simple_shuffle",
		LatencyBuffer:          0.10,
		CooldownBase:           5 * time.Second,
		CooldownMax:            5 * time.Minute,
		FailuresBeforeCooldown: 3,
		LastResort:             true,
		MinWeightFraction:      0.05,
		EWMADecay:              10 * time.Second,
		WarmCacheTTL:           5 * time.Minute,
		WarmCacheWeight:        4,
		SessionKeeping:         true,
		DefaultMaxTokens:       1024,
	}
}

type depOpt func(*catalog.Deployment)

func price(in, out float64) depOpt {
	return func(d *catalog.Deployment) { d.Price = config.Price{Input: in, Output: out} }
}
func weight(w float64) depOpt        { return func(d *catalog.Deployment) { d.Weight = w } }
func rpm(n int64) depOpt             { return func(d *catalog.Deployment) { d.RPM = n } }
func noTools() depOpt                { return func(d *catalog.Deployment) { d.Tools = false } }
func disabled() depOpt               { return func(d *catalog.Deployment) { d.On = false } }
func ops(o catalog.Operation) depOpt { return func(d *catalog.Deployment) { d.Ops = o } }
func maxContext(n int) depOpt        { return func(d *catalog.Deployment) { d.MaxContextTokens = n } }

var simProvider = &catalog.Provider{Provider: config.Provider{Name: "sim", Kind: "simulated"}}

func dep(id, model string, opts ...depOpt) *catalog.Deployment {
	d := &catalog.Deployment{
		Deployment: config.Deployment{ID: id, Model: model, Weight: 1},
		Ops:        catalog.OpChat, Provider: simProvider, Tools: true, On: true,
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// snap builds a snapshot; strategy maps model -> strategy[/objective]
// ("adaptive/cost"); a model not named gets round_robin, which makes attempt
// order deterministic.
func snap(strategy map[string]string, deps ...*catalog.Deployment) *catalog.Snapshot {
	s := &catalog.Snapshot{
		Deployments: map[string]*catalog.Deployment{},
		Models:      map[string]*catalog.Model{},
		Chains:      map[catalog.ChainKey][]string{},
	}
	for _, d := range deps {
		s.Deployments[d.ID] = d
		m := s.Models[d.Model]
		if m == nil {
			st, obj, _ := strings.Cut(strategy[d.Model], "/")
			if st == "" {
				st = "round_robin"
			}
			if obj == "" {
				obj = "balanced"
			}
			m = &catalog.Model{Name: d.Model, Strategy: st, Objective: obj}
			s.Models[d.Model] = m
		}
		m.Pool = append(m.Pool, d)
		m.Ops |= d.Ops
	}
	for _, m := range s.Models {
		slices.SortFunc(m.Pool, func(a, b *catalog.Deployment) int { return strings.Compare(a.ID, b.ID) })
	}
	return s
}

func chain(s *catalog.Snapshot, primary string, reason catalog.Reason, models ...string) {
	s.Chains[catalog.ChainKey{Primary: primary, Reason: reason}] = models
}

// recorder is an Observer that keeps every event as a string.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(f string, a ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(f, a...))
	r.mu.Unlock()
}
func (r *recorder) OnSelect(m, d, s string)     { r.add("select %s %s %s", m, d, s) }
func (r *recorder) OnReject(reason string)      { r.add("reject %s", reason) }
func (r *recorder) OnOutcome(d string, c Class) { r.add("outcome %s %s", d, c) }
func (r *recorder) OnCooldown(d, t string)      { r.add("cooldown %s %s", d, t) }
func (r *recorder) OnFallback(p string, reason catalog.Reason, t string) {
	r.add("fallback %s %s %s", p, reason, t)
}
func (r *recorder) OnSessionAffinity(o string)        { r.add("affinity %s", o) }
func (r *recorder) OnLatencyEstimate(string, float64) {}
func (r *recorder) OnProbe(d, outcome string)         { r.add("probe %s %s", d, outcome) }

// has reports whether an event with this prefix was recorded.
func (r *recorder) has(prefix string) bool { return r.count(prefix) > 0 }

func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

var _ Observer = (*recorder)(nil)

// harness is a router on a fake clock with a recording observer.
type harness struct {
	t     *testing.T
	clock *fakeclock.Clock
	obs   *recorder
	r     *Router
}

func newHarness(t *testing.T, cfg config.Routing) *harness {
	t.Helper()
	c := fakeclock.New(t0)
	obs := &recorder{}
	return &harness{t: t, clock: c, obs: obs, r: NewRouter(cfg, c, 1, obs, ratelimit.NewLocalUsage(c.Now))}
}

func (h *harness) plan(s *catalog.Snapshot, model string, mut ...func(*PlanInput)) *Plan {
	h.t.Helper()
	in := PlanInput{Snapshot: s, Model: model, MaxAttempts: 10, Profile: Profile{Op: catalog.OpChat, PromptTokens: 100, OutputTokens: 100}}
	for _, m := range mut {
		m(&in)
	}
	p, err := h.r.Plan(in)
	if err != nil {
		h.t.Fatalf("Plan(%s): %v", model, err)
	}
	return p
}

// run walks a plan, answering each attempt with outcome(deployment id, n-th
// attempt on it), and returns the attempted ids in order.
func run(p *Plan, outcome func(id string, n int) Outcome) []string {
	var order []string
	seen := map[string]int{}
	for {
		a, ok := p.Next()
		if !ok {
			return order
		}
		id := a.Deployment.ID
		seen[id]++
		order = append(order, fmt.Sprintf("%s%d", id, seen[id]))
		a.Done(outcome(id, seen[id]))
	}
}

// serve makes one request and reports which deployment answered it, every
// attempt succeeding with the latency lat(id).
func (h *harness) serve(s *catalog.Snapshot, model string, lat func(id string) time.Duration, mut ...func(*PlanInput)) string {
	h.t.Helper()
	p := h.plan(s, model, mut...)
	a, ok := p.Next()
	if !ok {
		h.t.Fatalf("no attempt for %s", model)
	}
	a.Done(Outcome{Status: 200, Class: ClassOK, Latency: lat(a.Deployment.ID)})
	return a.Deployment.ID
}

func ok() Outcome { return Outcome{Status: 200, Class: ClassOK, Latency: 100 * time.Millisecond} }
func fail(c Class, status int) Outcome {
	return Outcome{Status: status, Class: c, Latency: 50 * time.Millisecond}
}
