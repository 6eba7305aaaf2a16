package routing

import (
	"math"
	"testing"
	"time"

	"switchyard/catalog"
)

// feed completes an attempt on id that started at start and ends now.
func (h *harness) feed(id string, start time.Time, o Outcome) {
	st := h.r.State(id)
	st.inflight.Add(1)
	a := &Attempt{Deployment: &catalog.Deployment{}, state: st, tick: h.r.tick(start)}
	a.Deployment.ID = id
	h.r.complete(a, o, h.r.tick(h.clock.Now()))
}

// remaining is how long id's cooldown still runs, 0 when not cooling.
func (h *harness) remaining(id string) time.Duration {
	st := h.r.State(id)
	return time.Duration(max(st.coolUntil.Load()-h.r.tick(h.clock.Now()), 0))
}

func TestCooldownRules(t *testing.T) {
	type step struct {
		advance time.Duration
		o       Outcome
		remain  time.Duration // cooldown left right after the outcome
		streak  int
	}
	c := func(cl Class) Outcome { return Outcome{Class: cl, Latency: time.Millisecond} }
	ra := func(d time.Duration) Outcome { return Outcome{Class: ClassRateLimited, RetryAfter: d} }
	cases := []struct {
		name     string
		steps    []step
		triggers int
	}{
		{"429 doubles per consecutive 429 up to max", []step{
			{0, c(ClassRateLimited), 5 * time.Second, 0},
			{5 * time.Second, c(ClassRateLimited), 10 * time.Second, 0},
			{10 * time.Second, c(ClassRateLimited), 20 * time.Second, 0},
			{20 * time.Second, c(ClassRateLimited), 30 * time.Second, 0},
			{30 * time.Second, c(ClassRateLimited), 30 * time.Second, 0},
		}, 5},
		{"retry-after honoured when longer, capped at max", []step{
			{0, ra(20 * time.Second), 20 * time.Second, 0},
			{20 * time.Second, ra(time.Second), 10 * time.Second, 0},
			{10 * time.Second, ra(time.Hour), 30 * time.Second, 0},
		}, 3},
		{"401 cools for max at once", []step{{0, Outcome{Class: ClassAuth, Status: 401}, 30 * time.Second, 0}}, 1},
		{"403 cools for max at once", []step{{0, Outcome{Class: ClassAuth, Status: 403}, 30 * time.Second, 0}}, 1},
		{"404 cools for max at once", []step{{0, Outcome{Class: ClassNotFound, Status: 404}, 30 * time.Second, 0}}, 1},
		{"third failure in a row cools, doubling while failing", []step{
			{0, c(ClassServerError), 0, 1},
			{0, c(ClassTimeout), 0, 2},
			{0, c(ClassNetwork), 5 * time.Second, 3},
			{5 * time.Second, c(ClassServerError), 10 * time.Second, 4},
			{10 * time.Second, c(ClassOK), 0, 0},
			{0, c(ClassServerError), 0, 1},
		}, 2},
		{"a success resets the streak", []step{
			{0, c(ClassServerError), 0, 1},
			{0, c(ClassServerError), 0, 2},
			{0, c(ClassOK), 0, 0},
			{0, c(ClassServerError), 0, 1},
			{0, c(ClassServerError), 0, 2},
		}, 0},
		{"non-retryable 4xx neither cool nor touch the streak", []step{
			{0, c(ClassServerError), 0, 1},
			{0, c(ClassServerError), 0, 2},
			{0, c(ClassBadRequest), 0, 2},
			{0, c(ClassContextWindow), 0, 2},
			{0, c(ClassContentPolicy), 0, 2},
			{0, c(ClassServerError), 5 * time.Second, 3},
		}, 1},
		{"a canceled attempt never counts", []step{
			{0, c(ClassServerError), 0, 1},
			{0, c(ClassServerError), 0, 2},
			{0, c(ClassCanceled), 0, 2},
			{0, c(ClassCanceled), 0, 2},
			{0, c(ClassCanceled), 0, 2},
		}, 0},
		{"the multiplier restarts after a quiet cooldown_max", []step{
			{0, c(ClassRateLimited), 5 * time.Second, 0},
			{5 * time.Second, c(ClassRateLimited), 10 * time.Second, 0},
			{10*time.Second + 31*time.Second, c(ClassRateLimited), 5 * time.Second, 0},
		}, 3},
		{"a success ends the doubling for 429s", []step{
			{0, c(ClassRateLimited), 5 * time.Second, 0},
			{5 * time.Second, c(ClassRateLimited), 10 * time.Second, 0},
			{10 * time.Second, c(ClassOK), 0, 0},
			{0, c(ClassRateLimited), 5 * time.Second, 0},
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CooldownMax = 30 * time.Second
			h := newHarness(t, cfg)
			for i, s := range tc.steps {
				h.clock.Advance(s.advance)
				h.feed("a", h.clock.Now(), s.o)
				if got := h.remaining("a"); got != s.remain {
					t.Errorf("step %d (%s): cooldown left %v, want %v", i, s.o.Class, got, s.remain)
				}
				st := h.r.State("a")
				st.mu.Lock()
				streak := st.streak
				st.mu.Unlock()
				if streak != s.streak {
					t.Errorf("step %d (%s): streak %d, want %d", i, s.o.Class, streak, s.streak)
				}
			}
			if got := h.obs.count("cooldown a"); got != tc.triggers {
				t.Errorf("cooldowns started: %d, want %d (%v)", got, tc.triggers, h.obs.events)
			}
		})
	}
}

func TestCooldownTriggers(t *testing.T) {
	for _, tc := range []struct {
		classes []Class
		trigger string
	}{
		{[]Class{ClassRateLimited}, "cooldown a rate_limited"},
		{[]Class{ClassAuth}, "cooldown a auth"},
		{[]Class{ClassNotFound}, "cooldown a auth"},
		{[]Class{ClassServerError, ClassServerError, ClassServerError}, "cooldown a failures"},
	} {
		h := newHarness(t, testConfig())
		for _, c := range tc.classes {
			h.feed("a", h.clock.Now(), Outcome{Class: c})
		}
		if !h.obs.has(tc.trigger) {
			t.Errorf("%v: want %q, got %v", tc.classes, tc.trigger, h.obs.events)
		}
	}
}

// Attempts already in flight when a cooldown starts are stale: their
// failures neither extend nor escalate it.
func TestStaleOutcomesDoNotEscalate(t *testing.T) {
	h := newHarness(t, testConfig())
	start := h.clock.Now()
	h.clock.Advance(time.Second)
	for range 10 {
		h.feed("a", start, Outcome{Class: ClassRateLimited})
	}
	if got := h.remaining("a"); got != 5*time.Second {
		t.Fatalf("cooldown left %v, want 5s", got)
	}
	h.feed("a", start, ok()) // an older request succeeding proves nothing
	if got := h.remaining("a"); got != 5*time.Second {
		t.Fatalf("stale success changed the cooldown: %v left", got)
	}
	if n := h.obs.count("cooldown a"); n != 1 {
		t.Fatalf("%d cooldowns started, want 1", n)
	}
}

func TestPeakEWMA(t *testing.T) {
	h := newHarness(t, testConfig())
	st := h.r.State("a")
	est := func() time.Duration { return st.LatencyEstimate() }
	h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: 100 * time.Millisecond})
	if est() != 100*time.Millisecond {
		t.Fatalf("first sample: %v", est())
	}
	h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: 2 * time.Second})
	if est() != 2*time.Second {
		t.Fatalf("a sample above the estimate replaces it: %v", est())
	}
	h.clock.Advance(10 * time.Second) // one time constant
	h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: 100 * time.Millisecond})
	want := 2*time.Second - time.Duration(float64(1900*time.Millisecond)*(1-math.Exp(-1)))
	if d := est() - want; d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("decay after one time constant: %v, want %v", est(), want)
	}
	before := est()
	h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: time.Millisecond}) // dt = 0
	if est() != before {
		t.Fatalf("a sample at the same instant moved the estimate: %v -> %v", before, est())
	}
	h.feed("a", h.clock.Now(), Outcome{Class: ClassCanceled, Latency: time.Hour})
	if est() != before {
		t.Fatalf("a canceled attempt fed the estimate")
	}
	// Streams sample the time to first byte.
	st2 := h.r.State("s")
	st2.inflight.Add(1)
	a := &Attempt{Deployment: dep("s", "m"), state: st2, stream: true, tick: h.r.tick(h.clock.Now())}
	h.r.complete(a, Outcome{Class: ClassOK, Latency: 9 * time.Second, TTFB: 300 * time.Millisecond}, a.tick)
	if st2.LatencyEstimate() != 300*time.Millisecond {
		t.Fatalf("stream sample: %v, want the TTFB", st2.LatencyEstimate())
	}
}

func TestLatencyPrior(t *testing.T) {
	h := newHarness(t, testConfig())
	p := &Pick{}
	for _, id := range []string{"a", "b", "c", "new"} {
		p.Candidates = append(p.Candidates, Candidate{Deployment: dep(id, "m"), State: h.r.State(id)})
	}
	lat := make([]float64, 4)
	p.Latencies(lat)
	for i, l := range lat {
		if l != 1 {
			t.Fatalf("no samples: candidate %d prior %v, want 1s", i, l)
		}
	}
	for id, d := range map[string]time.Duration{"a": 100 * time.Millisecond, "b": 300 * time.Millisecond, "c": 2 * time.Second} {
		h.feed(id, h.clock.Now(), Outcome{Class: ClassOK, Latency: d})
	}
	p.Latencies(lat)
	if lat[3] != 0.3 || lat[0] != 0.1 || lat[2] != 2 {
		t.Fatalf("prior is the median of known estimates: %v", lat)
	}
}

func TestHealthReport(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("a", "m"), dep("b", "m"))
	h.r.Sync(s)
	h.feed("a", h.clock.Now(), Outcome{Class: ClassOK, Latency: 200 * time.Millisecond})
	h.feed("a", h.clock.Now(), Outcome{Class: ClassRateLimited})
	h.r.State("gone")
	h.r.Sync(s)
	got := h.r.Health(h.clock.Now())
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("health lists %+v, want a and b", got)
	}
	a := got[0]
	if !a.Cooling || !a.CooldownUntil.Equal(t0.Add(5*time.Second)) || a.CooldownTrigger != TriggerRateLimited {
		t.Errorf("cooldown: %+v", a)
	}
	if !a.NextProbe.Equal(t0.Add(time.Second)) {
		t.Errorf("next probe %v, want a fifth of the cooldown in", a.NextProbe)
	}
	if a.LatencySeconds != 0.2 || a.Recent["ok"] != 1 || a.Recent["rate_limited"] != 1 {
		t.Errorf("estimate and counts: %+v", a)
	}
	h.clock.Advance(3 * time.Minute)
	if got := h.r.Health(h.clock.Now())[0]; got.Cooling || len(got.Recent) != 0 {
		t.Errorf("three minutes later: %+v", got)
	}
}
