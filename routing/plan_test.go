package routing

import (
	"errors"
	"slices"
	"testing"
	"time"

	"switchyard/catalog"
)

// The example of SPEC 7.2/seed 003: primary {A, B}: A1, B1, A2; fallback-1
// {C}: C1, C2, C3; fallback-2 {D}: D1 succeeds.
func TestAttemptOrderSeedExample(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"), dep("C", "fb1"), dep("D", "fb2"))
	chain(s, "gpt", catalog.ReasonGeneral, "fb1", "fb2")
	outcomes := map[string]Outcome{
		"A1": fail(ClassServerError, 500), // retryable: A stays in the pool
		"B1": fail(ClassBadRequest, 400),  // non-retryable: B is exhausted
		"A2": fail(ClassAuth, 401),        // non-retryable and a cooldown: pool exhausted
		"C1": fail(ClassServerError, 503),
		"C2": fail(ClassTimeout, 0),
		"C3": fail(ClassServerError, 502), // third in a row: C cools down
		"D1": ok(),
	}
	p := h.plan(s, "gpt", func(in *PlanInput) { in.MaxAttempts = 10 })
	var order []string
	n := map[string]int{}
	for {
		a, more := p.Next()
		if !more {
			break
		}
		n[a.Deployment.ID]++
		key := a.Deployment.ID + string(rune('0'+n[a.Deployment.ID]))
		order = append(order, key)
		if a.N != len(order) || a.Fallback != (a.Model != "gpt") {
			t.Fatalf("attempt %s: N=%d fallback=%v model=%s", key, a.N, a.Fallback, a.Model)
		}
		a.Done(outcomes[key])
	}
	want := []string{"A1", "B1", "A2", "C1", "C2", "C3", "D1"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	res := p.Result()
	if res.Served == nil || res.Served.ID != "D" || !res.Degraded || res.Reason != catalog.ReasonGeneral || res.Attempts != 7 {
		t.Fatalf("result %+v", res)
	}
	var models []string
	for _, r := range res.Timeline {
		models = append(models, r.Model+":"+r.Deployment+":"+r.Class.String())
	}
	wantTL := []string{"gpt:A:server_error", "gpt:B:bad_request", "gpt:A:auth", "fb1:C:server_error", "fb1:C:timeout", "fb1:C:server_error", "fb2:D:ok"}
	if !slices.Equal(models, wantTL) {
		t.Fatalf("timeline %v, want %v", models, wantTL)
	}
	tl := res.Timeline[0]
	if tl.Adapter != "simulated" || tl.Transport != "http" || tl.Status != 500 || !tl.Start.Equal(t0) || tl.Duration != 50*time.Millisecond {
		t.Fatalf("record %+v", tl)
	}
	for _, e := range []string{"fallback gpt general fb1", "fallback gpt general fb2", "cooldown A auth", "cooldown C failures", "reject exhausted"} {
		if !h.obs.has(e) {
			t.Errorf("missing event %q in %v", e, h.obs.events)
		}
	}
	if _, more := p.Next(); more {
		t.Fatal("Next after success")
	}
}

func TestFallbackReason(t *testing.T) {
	cw, cp := fail(ClassContextWindow, 400), fail(ClassContentPolicy, 400)
	cases := []struct {
		name    string
		chains  map[catalog.Reason][]string
		global  []string
		primary func(id string) Outcome
		reason  catalog.Reason
		want    []string // attempted deployments after the primary's
	}{
		{"all context_window takes the context_window chain",
			map[catalog.Reason][]string{catalog.ReasonGeneral: {"gen"}, catalog.ReasonContextWindow: {"big"}}, nil,
			func(string) Outcome { return cw }, catalog.ReasonContextWindow, []string{"BIG1"}},
		{"all content_policy takes the content_policy chain",
			map[catalog.Reason][]string{catalog.ReasonGeneral: {"gen"}, catalog.ReasonContentPolicy: {"lax"}}, nil,
			func(string) Outcome { return cp }, catalog.ReasonContentPolicy, []string{"LAX1"}},
		{"mixed failures take general",
			map[catalog.Reason][]string{catalog.ReasonGeneral: {"gen"}, catalog.ReasonContextWindow: {"big"}}, nil,
			func(id string) Outcome {
				if id == "A" {
					return cw
				}
				return fail(ClassBadRequest, 400)
			}, catalog.ReasonGeneral, []string{"GEN1"}},
		{"a missing chain falls to the global list, not another reason's chain",
			map[catalog.Reason][]string{catalog.ReasonGeneral: {"gen"}}, []string{"glob"},
			func(string) Outcome { return cw }, catalog.ReasonContextWindow, []string{"GLOB1"}},
		{"global list after the chain, primary and repeats skipped",
			map[catalog.Reason][]string{catalog.ReasonGeneral: {"gen", "missing"}}, []string{"gpt", "gen", "glob"},
			func(string) Outcome { return fail(ClassServerError, 500) }, catalog.ReasonGeneral, []string{"GEN1", "GLOB1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := snap(nil, dep("A", "gpt"), dep("B", "gpt"), dep("GEN", "gen"), dep("BIG", "big"), dep("LAX", "lax"), dep("GLOB", "glob"))
			for r, ms := range tc.chains {
				chain(s, "gpt", r, ms...)
			}
			s.Global = tc.global
			p := h.plan(s, "gpt", func(in *PlanInput) { in.MaxAttempts = 20 })
			order := run(p, func(id string, n int) Outcome {
				if id == "A" || id == "B" {
					return tc.primary(id)
				}
				return fail(ClassBadRequest, 400)
			})
			var after []string
			for _, o := range order {
				if len(o) != 2 || (o[0] != 'A' && o[0] != 'B') {
					after = append(after, o)
				}
			}
			if !slices.Equal(after, tc.want) {
				t.Errorf("fallback attempts %v, want %v (all: %v)", after, tc.want, order)
			}
			if got := p.Result().Reason; got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
		})
	}
}

// Cooldowns and quotas in the primary pool make the reason general.
func TestReasonGeneralWithoutFailures(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("G", "gen"))
	chain(s, "gpt", catalog.ReasonGeneral, "gen")
	h.feed("A", h.clock.Now(), fail(ClassAuth, 401))
	order := run(h.plan(s, "gpt"), func(string, int) Outcome { return ok() })
	if !slices.Equal(order, []string{"G1"}) {
		t.Fatalf("order %v", order)
	}
}

func TestBudgetSharedAcrossFallbacks(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"), dep("C", "fb1"), dep("D", "fb2"))
	chain(s, "gpt", catalog.ReasonGeneral, "fb1", "fb2")
	p := h.plan(s, "gpt", func(in *PlanInput) { in.MaxAttempts = 4 })
	order := run(p, func(string, int) Outcome { return fail(ClassBadRequest, 400) })
	if !slices.Equal(order, []string{"A1", "B1", "C1", "D1"}) {
		t.Fatalf("order %v", order)
	}
	p = h.plan(s, "gpt", func(in *PlanInput) { in.MaxAttempts = 3 })
	order = run(p, func(string, int) Outcome { return fail(ClassServerError, 500) })
	if len(order) != 3 || p.Result().Attempts != 3 {
		t.Fatalf("budget 3 made %v", order)
	}
}

func TestNonRetryableExhaustsDeploymentNotPool(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"), dep("C", "gpt"))
	order := run(h.plan(s, "gpt"), func(string, int) Outcome { return fail(ClassContextWindow, 400) })
	slices.Sort(order)
	if !slices.Equal(order, []string{"A1", "B1", "C1"}) {
		t.Fatalf("each deployment once, got %v", order)
	}
	for _, id := range []string{"A", "B", "C"} {
		if h.remaining(id) != 0 {
			t.Fatalf("%s cooled down on a context-window error", id)
		}
	}
}

func TestCanceledEndsPlanAndNeverCounts(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"))
	p := h.plan(s, "gpt")
	a, _ := p.Next()
	a.Done(Outcome{Class: ClassCanceled})
	if _, more := p.Next(); more {
		t.Fatal("Next after a canceled attempt")
	}
	if a.state.streak != 0 || a.state.InFlight() != 0 {
		t.Fatalf("canceled attempt counted: streak %d in-flight %d", a.state.streak, a.state.InFlight())
	}
}

func TestLastResort(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("C", "fb"))
	chain(s, "gpt", catalog.ReasonGeneral, "fb")
	h.feed("A", h.clock.Now(), fail(ClassAuth, 401))             // 5m
	h.feed("C", h.clock.Now(), Outcome{Class: ClassRateLimited}) // 5s: ends first
	h.clock.Advance(500 * time.Millisecond)                      // no probe due yet
	p := h.plan(s, "gpt")
	a, more := p.Next()
	if !more || a.Deployment.ID != "C" || !a.LastResort || !a.Fallback {
		t.Fatalf("want a last-resort attempt on C, got %+v %v", a, more)
	}
	a.Done(Outcome{Class: ClassRateLimited, Status: 429})
	if _, more := p.Next(); more {
		t.Fatal("more than one last-resort attempt")
	}
	res := p.Result()
	if res.RetryAfter <= 0 || res.RetryAfter > 10*time.Second || !res.Timeline[0].LastResort {
		t.Fatalf("result %+v", res)
	}
	if !h.obs.has("select fb C last_resort") || !h.obs.has("fallback gpt general fb") {
		t.Fatalf("events %v", h.obs.events)
	}

	cfg := testConfig()
	cfg.LastResort = false
	h = newHarness(t, cfg)
	h.feed("A", h.clock.Now(), fail(ClassAuth, 401))
	h.feed("C", h.clock.Now(), fail(ClassAuth, 401))
	p = h.plan(s, "gpt")
	if _, more := p.Next(); more {
		t.Fatal("last resort while disabled")
	}
	if ra := p.Result().RetryAfter; ra != 5*time.Minute {
		t.Fatalf("retry after %v, want the shortest cooldown left", ra)
	}
}

// Select, fail, cool, probe (one at a time, once per interval), recover.
func TestRecoveryProbe(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("C", "fb"))
	chain(s, "gpt", catalog.ReasonGeneral, "fb")
	first := func() *Attempt {
		t.Helper()
		a, ok := h.plan(s, "gpt").Next()
		if !ok {
			t.Fatal("no attempt")
		}
		return a
	}

	a := first()
	if a.Deployment.ID != "A" {
		t.Fatalf("healthy: got %s", a.Deployment.ID)
	}
	a.Done(Outcome{Class: ClassRateLimited, Status: 429}) // A cools 5s, probe every 1s

	h.clock.Advance(500 * time.Millisecond)
	if a := first(); a.Deployment.ID != "C" || a.Probe {
		t.Fatalf("before the probe interval: %s probe=%v", a.Deployment.ID, a.Probe)
	} else {
		a.Done(ok())
	}

	h.clock.Advance(500 * time.Millisecond)
	probe := first()
	if probe.Deployment.ID != "A" || !probe.Probe {
		t.Fatalf("want a probe on A, got %s probe=%v", probe.Deployment.ID, probe.Probe)
	}
	if b := first(); b.Deployment.ID != "C" { // one probe at a time
		t.Fatalf("a second concurrent probe went to %s", b.Deployment.ID)
	} else {
		b.Done(ok())
	}
	probe.Done(Outcome{Class: ClassRateLimited, Status: 429}) // failed probe: 10s, probes every 2s
	if got := h.remaining("A"); got != 10*time.Second {
		t.Fatalf("failed probe re-armed %v, want 10s", got)
	}

	h.clock.Advance(time.Second)
	if a := first(); a.Deployment.ID != "C" {
		t.Fatalf("probe interval not respected: %s", a.Deployment.ID)
	} else {
		a.Done(ok())
	}
	h.clock.Advance(time.Second)
	probe = first()
	if probe.Deployment.ID != "A" || !probe.Probe {
		t.Fatalf("second probe: %s probe=%v", probe.Deployment.ID, probe.Probe)
	}
	probe.Done(ok()) // recovered
	if h.remaining("A") != 0 {
		t.Fatal("a successful probe did not end the cooldown")
	}
	if a := first(); a.Deployment.ID != "A" || a.Probe {
		t.Fatalf("after recovery: %s probe=%v", a.Deployment.ID, a.Probe)
	}
	if !h.obs.has("select gpt A probe") {
		t.Fatalf("events %v", h.obs.events)
	}
}

// A cooling deployment is skipped while another of its pool is available,
// and back once the cooldown has run out.
func TestCoolingSkippedWhileOthersAvailable(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	s := snap(map[string]string{"gpt": "simple_shuffle"}, dep("A", "gpt"), dep("B", "gpt"))
	h.feed("A", h.clock.Now(), fail(ClassAuth, 403))
	for range 50 {
		if id := h.serve(s, "gpt", func(string) time.Duration { return time.Millisecond }); id != "B" {
			t.Fatalf("cooling A picked")
		}
	}
	h.clock.Advance(cfg.CooldownMax)
	seen := map[string]bool{}
	for range 50 {
		seen[h.serve(s, "gpt", func(string) time.Duration { return time.Millisecond })] = true
	}
	if !seen["A"] {
		t.Fatal("A not back after its cooldown")
	}
	if h.obs.count("reject cooldown") != 50 {
		t.Fatalf("want one cooldown rejection per request, got %d", h.obs.count("reject cooldown"))
	}
}

func TestNoPool(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt", disabled()), dep("E", "emb", ops(catalog.OpEmbeddings)), dep("T", "tl", noTools()))
	for _, tc := range []struct {
		model string
		prof  Profile
	}{
		{"nope", Profile{Op: catalog.OpChat}},
		{"gpt", Profile{Op: catalog.OpChat}},
		{"emb", Profile{Op: catalog.OpChat}},
		{"tl", Profile{Op: catalog.OpChat, Tools: true}},
	} {
		if _, err := h.r.Plan(PlanInput{Snapshot: s, Model: tc.model, Profile: tc.prof, MaxAttempts: 3}); !errors.Is(err, ErrNoPool) {
			t.Errorf("%s: err %v, want ErrNoPool", tc.model, err)
		}
	}
	if _, err := h.r.Plan(PlanInput{Snapshot: s, Model: "emb", Profile: Profile{Op: catalog.OpEmbeddings}}); err != nil {
		t.Errorf("embeddings: %v", err)
	}
}

// Each fallback's pool is filtered again for the same operation and profile.
func TestFallbackRefiltered(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("S", "small", maxContext(1000)), dep("N", "notools", noTools()),
		dep("E", "emb", ops(catalog.OpEmbeddings)), dep("X", "off", disabled()), dep("G", "good"))
	chain(s, "gpt", catalog.ReasonGeneral, "small", "notools", "emb", "off", "good")
	p := h.plan(s, "gpt", func(in *PlanInput) { in.Profile.PromptTokens, in.Profile.Tools = 5000, true })
	order := run(p, func(id string, _ int) Outcome {
		if id == "G" {
			return ok()
		}
		return fail(ClassServerError, 500)
	})
	if !slices.Equal(order, []string{"A1", "A2", "A3", "G1"}) {
		t.Fatalf("order %v", order)
	}
}

func TestDeploymentQuota(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"gpt": "simple_shuffle"}, dep("A", "gpt", rpm(2)), dep("B", "gpt", rpm(1)))
	got := map[string]int{}
	for range 3 {
		got[h.serve(s, "gpt", func(string) time.Duration { return time.Millisecond })]++
	}
	if got["A"] != 2 || got["B"] != 1 {
		t.Fatalf("served %v, want A twice and B once", got)
	}
	p := h.plan(s, "gpt")
	if _, more := p.Next(); more {
		t.Fatal("attempt over quota")
	}
	if ra := p.Result().RetryAfter; ra != time.Minute {
		t.Fatalf("retry after %v, want the rest of the minute", ra)
	}
	if !h.obs.has("reject quota") {
		t.Fatal("no quota rejection")
	}
	h.clock.Advance(2 * time.Minute)
	if id := h.serve(s, "gpt", func(string) time.Duration { return time.Millisecond }); id == "" {
		t.Fatal("quota did not reset")
	}
}

func TestSessionKeeping(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"gpt": "simple_shuffle"}, dep("A", "gpt"), dep("B", "gpt"), dep("C", "gpt"))
	pinned := func(in *PlanInput) { in.Session, in.SessionDeployment = "team/s1", "B" }
	for range 30 {
		p := h.plan(s, "gpt", pinned)
		a, _ := p.Next()
		if a.Deployment.ID != "B" || !a.Session {
			t.Fatalf("pin not honored: %s", a.Deployment.ID)
		}
		a.Done(ok())
		if r := p.Result(); r.SessionDeployment != "B" || r.Affinity != AffinityHonored {
			t.Fatalf("result %+v", r)
		}
	}
	h.feed("B", h.clock.Now(), Outcome{Class: ClassRateLimited})
	p := h.plan(s, "gpt", pinned)
	a, _ := p.Next()
	if a.Deployment.ID == "B" {
		t.Fatal("pin honored while cooling")
	}
	a.Done(ok())
	if r := p.Result(); r.SessionDeployment != a.Deployment.ID || r.Affinity != AffinityReleased {
		t.Fatalf("after release: %+v", r)
	}
	if h.obs.count("affinity honored") != 30 || h.obs.count("affinity released") != 1 {
		t.Fatalf("affinity events: %v", h.obs.events)
	}

	// The pin only holds the first attempt: a failed pinned attempt fails
	// over, but the session stays pinned to B while B is not cooling down
	// (SPEC 8; TestSessionPinSurvivesFailover).
	h.clock.Advance(time.Minute)
	p = h.plan(s, "gpt", pinned)
	order := run(p, func(id string, _ int) Outcome {
		if id == "B" {
			return fail(ClassServerError, 500)
		}
		return ok()
	})
	if len(order) != 2 || order[0] != "B1" || p.Result().SessionDeployment != "B" {
		t.Fatalf("order %v result %+v", order, p.Result())
	}

	// Session keeping off: the pin is ignored.
	cfg := testConfig()
	cfg.SessionKeeping = false
	h = newHarness(t, cfg)
	seen := map[string]bool{}
	for range 50 {
		seen[h.serve(s, "gpt", func(string) time.Duration { return time.Millisecond }, pinned)] = true
	}
	if len(seen) < 2 {
		t.Fatal("pin honored with session keeping off")
	}
}

// TestSessionPinSurvivesFailover: a honored pin whose attempt fails is
// released only when the failure put its deployment into cooldown (SPEC 8:
// "The pin is released only when its deployment enters cooldown"). A
// transient 500 or a non-retryable error fails the request over, and the
// session stays on its deployment and its warm prompt cache.
func TestSessionPinSurvivesFailover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []Outcome // fed to B before the request
		pinned Outcome   // the pinned attempt's outcome
		keep   bool      // the session stays pinned to B
	}{
		{"served by the pin", nil, ok(), true},
		{"one 500", nil, fail(ClassServerError, 500), true},
		{"second 500 in a row", []Outcome{fail(ClassServerError, 500)}, fail(ClassServerError, 503), true},
		{"third 500 in a row cools B", []Outcome{fail(ClassServerError, 500), fail(ClassServerError, 500)}, fail(ClassServerError, 500), false},
		{"timeout", nil, fail(ClassTimeout, 0), true},
		{"context window", nil, fail(ClassContextWindow, 400), true},
		{"bad request", nil, fail(ClassBadRequest, 400), true},
		{"429 cools B", nil, fail(ClassRateLimited, 429), false},
		{"401 cools B", nil, fail(ClassAuth, 401), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := snap(map[string]string{"gpt": "round_robin"}, dep("A", "gpt"), dep("B", "gpt"), dep("C", "gpt"))
			for _, o := range tc.before {
				h.feed("B", h.clock.Now(), o)
			}
			h.clock.Advance(time.Second)
			p := h.plan(s, "gpt", func(in *PlanInput) { in.Session, in.SessionDeployment = "team/s1", "B" })
			order := run(p, func(id string, _ int) Outcome {
				if id == "B" {
					return tc.pinned
				}
				return ok()
			})
			res := p.Result()
			if order[0] != "B1" || res.Served == nil || res.Affinity != AffinityHonored {
				t.Fatalf("order %v result %+v", order, res)
			}
			want := res.Served.ID
			if tc.keep {
				want = "B"
			}
			if res.SessionDeployment != want {
				t.Fatalf("order %v: session pinned to %q, want %q (B cooling: %v)", order, res.SessionDeployment, want, h.remaining("B") > 0)
			}
		})
	}
}

func TestAttemptContract(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"))
	p := h.plan(s, "gpt")
	a, _ := p.Next()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Next before Done did not panic")
			}
		}()
		p.Next()
	}()
	a.Done(fail(ClassServerError, 500))
	a.Done(ok()) // ignored
	if a.state.InFlight() != 0 || p.Result().Served != nil {
		t.Fatalf("second Done applied")
	}
	b, _ := p.Next()
	if b.Deployment.ID != "B" || b.N != 2 {
		t.Fatalf("next %s N=%d", b.Deployment.ID, b.N)
	}
	if b.state.InFlight() != 1 {
		t.Fatal("in-flight not counted")
	}
	b.Done(Outcome{Class: ClassOK, Status: 200})
	if r := p.Result(); r.Served.ID != "B" || r.Degraded || r.Attempts != 2 || r.RetryAfter != 0 {
		t.Fatalf("result %+v", r)
	}
}
