package routing

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// Scenario tests of SPEC 6's rediscovery: recovery probes taken from live
// traffic while the pool has healthy peers, and latency estimates that age
// toward the pool's median. Everything runs on the fake clock.

// threePool is model "m" over a, b and c with the given strategy.
func threePool(strategy string) *catalog.Snapshot {
	return snap(map[string]string{"m": strategy}, dep("a", "m"), dep("b", "m"), dep("c", "m"))
}

// request runs one request to its end: each attempt answered by outcome
// (by deployment id); it returns the plan's result.
func (h *harness) request(s *catalog.Snapshot, outcome func(id string) Outcome) PlanResult {
	h.t.Helper()
	p := h.plan(s, "m")
	for {
		a, more := p.Next()
		if !more {
			return p.Result()
		}
		a.Done(outcome(a.Deployment.ID))
	}
}

// coolC puts c into a failures cooldown now (three 503s in a row).
func (h *harness) coolC() {
	h.t.Helper()
	for range 3 {
		h.feed("c", h.clock.Now(), fail(ClassServerError, 503))
	}
	if h.remaining("c") == 0 {
		h.t.Fatal("c did not cool down")
	}
}

// probeOffsets returns the start times (as offsets from base) of the probe attempts
// on id in the timeline, and checks each one's cost: a failed probe is
// followed at once by a served attempt on a healthy peer.
func probeOffsets(t *testing.T, res PlanResult, base time.Time) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i, rec := range res.Timeline {
		if !rec.Probe {
			continue
		}
		if i != 0 {
			t.Fatalf("a probe on attempt %d: only a request's first attempt carries one: %+v", i+1, res.Timeline)
		}
		out = append(out, rec.Start.Sub(base))
		if rec.Class != ClassOK {
			if len(res.Timeline) != 2 || res.Served == nil || res.Served.ID == rec.Deployment {
				t.Fatalf("a failed probe must fail over at once to a healthy peer: %+v", res.Timeline)
			}
		}
	}
	return out
}

// With healthy peers, a cooling deployment gets exactly one probe per
// probe_interval, also when many requests arrive at once, and each failed
// probe costs its request exactly one extra attempt.
func TestProbeOnePerIntervalWithHealthyPeers(t *testing.T) {
	cfg := testConfig()
	cfg.ProbeInterval = time.Second
	h := newHarness(t, cfg)
	s := threePool("round_robin")
	h.coolC()
	base := h.clock.Now()
	failC := func(id string) Outcome {
		if id == "c" {
			return fail(ClassServerError, 503)
		}
		return ok()
	}
	var probes []time.Duration
	for range 400 { // 10 s of traffic, 40 requests/s, bursts of four at one instant
		h.clock.Advance(100 * time.Millisecond)
		burst := make([]*Plan, 4)
		first := make([]*Attempt, 4)
		for i := range burst { // four requests in flight together
			burst[i] = h.plan(s, "m")
			first[i], _ = burst[i].Next()
		}
		for i, p := range burst {
			if first[i].Probe {
				probes = append(probes, first[i].Start.Sub(base))
			}
			a := first[i]
			for {
				a.Done(failC(a.Deployment.ID))
				var more bool
				if a, more = p.Next(); !more {
					break
				}
			}
			probeOffsets(t, p.Result(), base)
		}
		if h.clock.Now().Sub(base) >= 10*time.Second {
			break
		}
	}
	want := []time.Duration{}
	for i := 1; i <= 10; i++ {
		want = append(want, time.Duration(i)*time.Second)
	}
	if !slices.Equal(probes, want) {
		t.Fatalf("probes at %v, want exactly one per second: %v", probes, want)
	}
	if n := h.obs.count("probe c failure"); n != 10 {
		t.Fatalf("%d failed probes in the metrics, want 10", n)
	}
	if h.remaining("c") == 0 {
		t.Fatal("c left its cooldown without a successful probe")
	}
}

// The default probe interval is a fifth of the current cooldown; every
// failed probe escalates the cooldown (doubling) and with it the interval;
// a successful probe ends the cooldown and c gets its share back at once.
func TestProbeEscalatesAndRecovers(t *testing.T) {
	h := newHarness(t, testConfig()) // cooldown_base 5s, probe_interval 0
	s := threePool("round_robin")
	h.coolC()
	base := h.clock.Now()
	healthy := false
	outcome := func(id string) Outcome {
		if id == "c" && !healthy {
			return fail(ClassServerError, 503)
		}
		return ok()
	}
	var probes []time.Duration
	var remain []time.Duration
	for h.clock.Now().Sub(base) < 15*time.Second+50*time.Millisecond {
		h.clock.Advance(50 * time.Millisecond)
		res := h.request(s, outcome)
		if got := probeOffsets(t, res, base); len(got) > 0 {
			probes = append(probes, got...)
			remain = append(remain, h.remaining("c"))
		}
	}
	// Cooldowns 5s, 10s, 20s, 40s: probes a fifth in, each failure re-arms.
	if want := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}; !slices.Equal(probes, want) {
		t.Fatalf("probes at %v, want %v", probes, want)
	}
	if want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}; !slices.Equal(remain, want) {
		t.Fatalf("cooldown after each failed probe %v, want it doubling: %v", remain, want)
	}

	healthy = true
	h.clock.Advance(16 * time.Second) // the next probe is due 16s after the last
	res := h.request(s, outcome)
	if len(res.Timeline) != 1 || !res.Timeline[0].Probe || res.Served == nil || res.Served.ID != "c" {
		t.Fatalf("want a successful probe on c, got %+v", res.Timeline)
	}
	if h.remaining("c") != 0 {
		t.Fatal("a successful probe did not end the cooldown")
	}
	if !h.obs.has("probe c success") || !h.obs.has("select m c probe") {
		t.Fatalf("events %v", h.obs.events)
	}
	got := map[string]int{}
	for range 30 {
		h.clock.Advance(50 * time.Millisecond)
		res := h.request(s, outcome)
		got[res.Served.ID]++
		if res.Timeline[0].Probe {
			t.Fatal("a probe after the recovery")
		}
	}
	if got["c"] != 10 {
		t.Fatalf("after the recovery c served %d of 30 round-robin requests, want 10", got["c"])
	}
}

// A cooldown that carries the upstream's Retry-After is not probed before
// it has passed, even when the probe interval says otherwise; one as long
// as its Retry-After is not probed at all.
func TestNoProbeBeforeRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Outcome
		n          int           // outcomes that start the cooldown
		firstProbe time.Duration // 0: none while cooling
	}{
		{"429 retry-after shorter than the backoff", Outcome{Class: ClassRateLimited, Status: 429, RetryAfter: 3 * time.Second}, 1, 3 * time.Second},
		{"429 retry-after sets the cooldown", Outcome{Class: ClassRateLimited, Status: 429, RetryAfter: 8 * time.Second}, 1, 0},
		{"429 without retry-after", Outcome{Class: ClassRateLimited, Status: 429}, 1, time.Second},
		{"503 with retry-after", Outcome{Class: ClassServerError, Status: 503, RetryAfter: 2500 * time.Millisecond}, 3, 2500 * time.Millisecond},
		// An HTTP-date far in the future parses to the largest Duration;
		// the cooldown is capped at cooldown_max and, its Retry-After
		// being longer, is never probed (no tick overflow).
		{"429 retry-after of the largest duration", Outcome{Class: ClassRateLimited, Status: 429, RetryAfter: math.MaxInt64}, 1, 0},
		{"401 retry-after of the largest duration", Outcome{Class: ClassAuth, Status: 401, RetryAfter: math.MaxInt64}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := threePool("round_robin")
			for range tc.n {
				h.feed("c", h.clock.Now(), tc.o)
			}
			base := h.clock.Now()
			until := base.Add(h.remaining("c"))
			var first time.Duration
			for h.clock.Now().Before(until) {
				h.clock.Advance(50 * time.Millisecond)
				res := h.request(s, func(id string) Outcome {
					if id == "c" {
						return tc.o
					}
					return ok()
				})
				if got := probeOffsets(t, res, base); len(got) > 0 {
					first = got[0]
					break
				}
			}
			if first != tc.firstProbe {
				t.Fatalf("first probe %v after the cooldown began, want %v (0 = none)", first, tc.firstProbe)
			}
		})
	}
}

// A probe is carried only by a request with room to fail over, and a
// request honoring its session pin never carries one.
func TestProbeCarriers(t *testing.T) {
	h := newHarness(t, testConfig())
	s := threePool("round_robin")
	h.coolC()
	h.clock.Advance(time.Second) // probe due
	p := h.plan(s, "m", func(in *PlanInput) { in.MaxAttempts = 1 })
	if a, _ := p.Next(); a.Probe {
		t.Fatal("a one-attempt request carried a probe: a failed probe could not fail over")
	} else {
		a.Done(ok())
	}
	p = h.plan(s, "m", func(in *PlanInput) { in.Session, in.SessionDeployment = "s1", "a" })
	if a, _ := p.Next(); a.Probe || a.Deployment.ID != "a" {
		t.Fatalf("a pinned session went to %s probe=%v", a.Deployment.ID, a.Probe)
	} else {
		a.Done(ok())
	}
	p = h.plan(s, "m")
	if a, _ := p.Next(); !a.Probe || a.Deployment.ID != "c" {
		t.Fatalf("the next ordinary request should carry the probe, got %s probe=%v", a.Deployment.ID, a.Probe)
	} else {
		a.Done(Outcome{Class: ClassCanceled})
	}
	if !h.obs.has("probe c inconclusive") || h.remaining("c") == 0 {
		t.Fatalf("a canceled probe decides nothing: events %v", h.obs.events)
	}
}

// An estimate without samples slides to the median of its pool's fresh
// estimates within two ewma_decays (a linear slide over the second one),
// and the latency strategy then selects the deployment again; its first
// sample tells the truth.
func TestAgedEstimateReachesMedian(t *testing.T) {
	h := newHarness(t, testConfig()) // ewma_decay 10s
	s := threePool("latency")
	for _, id := range []string{"a", "b", "c", "d"} {
		h.feed(id, h.clock.Now(), Outcome{Class: ClassOK, Latency: 20 * time.Millisecond})
	}
	h.feed("c", h.clock.Now(), Outcome{Class: ClassOK, Latency: 200 * time.Millisecond})
	h.feed("d", h.clock.Now(), Outcome{Class: ClassOK, Latency: 30 * time.Millisecond})
	p := h.pickOf(nil, s.Models["m"].Pool...)
	p.Candidates = append(p.Candidates, Candidate{Deployment: dep("d", "m"), State: h.r.State("d")})
	p.decay = int64(10 * time.Second)
	lat := make([]float64, 4)
	// a and b keep getting samples; c and d do not. The fresh median is
	// a's and b's 20ms; both stale estimates slide to it.
	for _, tc := range []struct {
		at   time.Duration
		c, d float64
	}{
		{5 * time.Second, 0.2, 0.03},
		{10 * time.Second, 0.2, 0.03},
		{15 * time.Second, 0.11, 0.025},
		{20 * time.Second, 0.02, 0.02},
		{60 * time.Second, 0.02, 0.02},
	} {
		h.clock.Set(t0.Add(tc.at))
		h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: 20 * time.Millisecond})
		h.feed("b", h.clock.Now(), Outcome{Class: ClassOK, Latency: 20 * time.Millisecond})
		p.tick = h.r.tick(h.clock.Now())
		p.Latencies(lat)
		if math.Abs(lat[2]-tc.c) > 1e-9 || math.Abs(lat[3]-tc.d) > 1e-9 {
			t.Errorf("%v without a sample: c %.4fs d %.4fs, want %.4fs %.4fs", tc.at, lat[2], lat[3], tc.c, tc.d)
		}
		if math.Abs(lat[0]-0.02) > 1e-9 {
			t.Errorf("%v: a fresh estimate aged: %v", tc.at, lat[0])
		}
	}
	// With no fresh estimate left, the stale ones slide to the median of
	// all known: nothing in the pool is preferred on old news.
	h.clock.Advance(time.Hour)
	p.tick = h.r.tick(h.clock.Now())
	p.Latencies(lat)
	for i, l := range lat { // median of 20, 20, 30, 200 ms
		if math.Abs(l-0.025) > 1e-9 {
			t.Errorf("all stale: candidate %d at %v, want the median 25ms", i, l)
		}
	}

	// The latency strategy over a, b, c: c slow once, then nothing.
	h = newHarness(t, testConfig())
	cLatency := 200 * time.Millisecond
	latOf := func(id string) time.Duration {
		if id == "c" {
			return cLatency
		}
		return 20 * time.Millisecond
	}
	for _, id := range []string{"a", "b", "c"} {
		h.feed(id, h.clock.Now(), Outcome{Class: ClassOK, Latency: latOf(id)})
	}
	step := 10 * time.Millisecond
	back := time.Duration(0)
	for el := step; el <= 25*time.Second && back == 0; el += step {
		h.clock.Advance(step)
		if h.serve(s, "m", latOf) == "c" {
			back = el
		}
	}
	// Within the 10% latency_buffer of the best once 98.9% of the slide is done.
	if back < 19800*time.Millisecond || back > 20*time.Second {
		t.Fatalf("latency selected c again %v after its last sample, want just under two ewma_decays", back)
	}
	if got := h.r.State("c").LatencyEstimate(); got != cLatency {
		t.Fatalf("c was still slow: its sample should restore the estimate, got %v", got)
	}
	// Now c has recovered: the next rediscovery (within two ewma_decays)
	// keeps it, on its first fast sample.
	cLatency = 20 * time.Millisecond
	for range 2000 { // 20s
		h.clock.Advance(step)
		h.serve(s, "m", latOf)
	}
	got := map[string]int{}
	for range 1000 { // the next 10s
		h.clock.Advance(step)
		got[h.serve(s, "m", latOf)]++
	}
	if sc := share(got, "c"); sc < 0.25 {
		t.Fatalf("recovered c served %.3f of the traffic, want about a third", sc)
	}
}

// A deployment that failed fast through an outage comes back with an
// estimate aged toward its pool: failures that do not raise the estimate
// are no samples.
func TestFastFailuresDoNotRefreshTheEstimate(t *testing.T) {
	h := newHarness(t, testConfig())
	h.feed("c", h.clock.Now(), Outcome{Class: ClassOK, Latency: 200 * time.Millisecond})
	for range 30 {
		h.clock.Advance(time.Second)
		h.feed("c", h.clock.Now(), Outcome{Class: ClassServerError, Latency: time.Millisecond})
	}
	e := &h.r.State("c").estimate
	if !e.stale(h.r.tick(h.clock.Now()), int64(10*time.Second)) {
		t.Fatal("fast failures refreshed the estimate's age")
	}
	h.feed("c", h.clock.Now(), Outcome{Class: ClassTimeout, Latency: time.Second})
	if e.raw() != int64(time.Second) || e.stale(h.r.tick(h.clock.Now()), int64(10*time.Second)) {
		t.Fatal("a failure that raises the estimate is a sample")
	}
}

// No strategy can lose a recovered deployment. Over every strategy (and
// every adaptive objective), c turns slow, then fails every request for a
// minute (its cooldown escalates), then recovers; a second scenario has
// only the slow spell, which no cooldown marks, so only aging brings it
// back. After the recovery c must carry 15% of the traffic again within
// the bound the mechanisms give: the next probe of its cooldown (a fifth of
// it by default), or two ewma_decays for an estimate to age to the pool's
// median, whichever is later, plus the window the share is measured over.
func TestNoStrategyLosesARecoveredDeployment(t *testing.T) {
	strategies := append(slices.Clone(config.Strategies), "adaptive/latency", "adaptive/cost")
	type phase struct {
		d       time.Duration
		latency time.Duration // c's latency; 0 = failing with a 503
	}
	scenarios := map[string][]phase{
		"slow then outage": {{20 * time.Second, 20 * time.Millisecond}, {20 * time.Second, 200 * time.Millisecond}, {60 * time.Second, 0}},
		"slow only":        {{20 * time.Second, 20 * time.Millisecond}, {40 * time.Second, 200 * time.Millisecond}},
	}
	const (
		step   = 10 * time.Millisecond // 100 requests/s
		window = 2 * time.Second
	)
	for name, phases := range scenarios {
		for _, strategy := range strategies {
			t.Run(fmt.Sprintf("%s/%s", name, strategy), func(t *testing.T) {
				h := newHarness(t, testConfig())
				s := threePool(strategy)
				cur := phases[0].latency
				outcome := func(id string) Outcome {
					switch {
					case id != "c":
						return Outcome{Class: ClassOK, Status: 200, Latency: 20 * time.Millisecond}
					case cur == 0:
						return Outcome{Class: ClassServerError, Status: 503, Latency: 5 * time.Millisecond}
					}
					return Outcome{Class: ClassOK, Status: 200, Latency: cur}
				}
				for _, ph := range phases {
					cur = ph.latency
					for el := time.Duration(0); el < ph.d; el += step {
						h.clock.Advance(step)
						if res := h.request(s, outcome); res.Served == nil {
							t.Fatalf("a request failed: %+v", res.Timeline)
						}
					}
				}
				cur = 20 * time.Millisecond // recovered
				cfg := testConfig()
				goal := 2*cfg.EWMADecay + window
				if st := h.r.State("c"); st.coolingAt(h.r.tick(h.clock.Now())) {
					next := time.Duration(st.nextProbe(&h.r.rules) - h.r.tick(h.clock.Now()))
					goal = max(goal, next+window)
				}
				var served []bool // per request after the recovery: did c serve it
				recovered := time.Duration(0)
				for el := step; el <= 60*time.Second; el += step {
					h.clock.Advance(step)
					res := h.request(s, outcome)
					served = append(served, res.Served != nil && res.Served.ID == "c")
					n := int(window / step)
					if recovered == 0 && len(served) >= n {
						c := 0
						for _, v := range served[len(served)-n:] {
							if v {
								c++
							}
						}
						if float64(c)/float64(n) >= 0.15 {
							recovered = el
						}
					}
				}
				if recovered == 0 || recovered > goal {
					t.Fatalf("c back to 15%% of the traffic %v after recovering (0 = never), want <= %v", recovered, goal)
				}
				t.Logf("back to 15%% after %v (bound %v)", recovered, goal)
			})
		}
	}
}
