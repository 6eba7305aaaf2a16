package routing

import (
	"math"
	"testing"
	"time"

	"switchyard/catalog"
)

// simulate makes n sequential requests, one every step of fake time, each
// answered after lat(id), and returns how many each deployment served.
func (h *harness) simulate(s *catalog.Snapshot, model string, n int, step time.Duration, lat func(id string) time.Duration, mut ...func(*PlanInput)) map[string]int {
	h.t.Helper()
	got := map[string]int{}
	for range n {
		h.clock.Advance(step)
		got[h.serve(s, model, lat, mut...)]++
	}
	return got
}

func share(c map[string]int, id string) float64 {
	total := 0
	for _, n := range c {
		total += n
	}
	return float64(c[id]) / float64(total)
}

func TestAdaptiveShareMatchesWeights(t *testing.T) {
	h := newHarness(t, testConfig())
	deps := []*catalog.Deployment{dep("a", "m", weight(1)), dep("b", "m", weight(2)), dep("c", "m", weight(3)), dep("d", "m", weight(4))}
	for _, d := range deps {
		h.setLatency(d.ID, 200*time.Millisecond)
	}
	for _, obj := range []string{"latency", "cost", "balanced"} {
		p := h.pickOf(&catalog.Model{Name: "m", Objective: obj}, deps...)
		got := shares(NewAdaptive(testConfig()), p, 100_000)
		// With equal loads the first draw wins: shares equal the weights.
		for id, want := range map[string]float64{"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4} {
			if math.Abs(got[id]-want) > 0.01 {
				t.Errorf("%s: %s share %.4f, want %.2f±0.01", obj, id, got[id], want)
			}
		}
	}
}

// A deployment that turns slow loses its traffic within seconds but keeps
// its floor weight; once it recovers it wins its traffic back.
func TestAdaptiveSlowLosesTrafficAndRecovers(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"m": "adaptive/latency"}, dep("a", "m"), dep("b", "m"))
	bLatency := 100 * time.Millisecond
	lat := func(id string) time.Duration {
		if id == "b" {
			return bLatency
		}
		return 100 * time.Millisecond
	}
	step := 10 * time.Millisecond // 100 requests/s

	warm := h.simulate(s, "m", 1000, step, lat)
	if sb := share(warm, "b"); sb < 0.4 || sb > 0.6 {
		t.Fatalf("equal deployments: b share %.3f", sb)
	}

	bLatency = 2 * time.Second
	first := h.simulate(s, "m", 200, step, lat) // two seconds
	if sb := share(first, "b"); sb > 0.05 {
		t.Fatalf("first 2s after b turned slow: b share %.3f, want < 5%%", sb)
	}
	slow := h.simulate(s, "m", 6000, step, lat) // one minute
	// b keeps the weight floor: 5% of the heaviest.
	p := h.pickOf(s.Models["m"], s.Models["m"].Pool...)
	lt, w := make([]float64, 2), make([]float64, 2)
	NewAdaptive(testConfig()).Weights(p, lt, w)
	if math.Abs(w[1]-0.05*w[0]) > 1e-9 {
		t.Fatalf("weights %v: b should sit on the floor, 5%% of a", w)
	}
	// Its traffic share is then the chance of being drawn twice, (0.05/1.05)^2.
	floorShare := math.Pow(0.05/1.05, 2)
	if sb := share(slow, "b"); slow["b"] == 0 || sb < floorShare/2 || sb > 3*floorShare {
		t.Fatalf("slow minute: b served %d (share %.4f), want about the floor share %.4f", slow["b"], sb, floorShare)
	}

	bLatency = 100 * time.Millisecond // recovered: the trickle of real requests proves it
	h.simulate(s, "m", 6000, step, lat)
	back := h.simulate(s, "m", 1000, step, lat)
	if sb := share(back, "b"); sb < 0.4 {
		t.Fatalf("a minute after recovery: b share %.3f, want it back near half", sb)
	}
}

// Objective cost prefers the cheaper deployment until its latency gets bad.
func TestAdaptiveCostObjective(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"m": "adaptive/cost"}, dep("cheap", "m", price(1, 1)), dep("dear", "m", price(2, 2)))
	cheapLatency := 100 * time.Millisecond
	lat := func(id string) time.Duration {
		if id == "cheap" {
			return cheapLatency
		}
		return 100 * time.Millisecond
	}
	got := h.simulate(s, "m", 3000, 10*time.Millisecond, lat)
	if sc := share(got, "cheap"); sc < 0.6 {
		t.Fatalf("equal latency: cheap share %.3f, want it preferred (2/3)", sc)
	}
	cheapLatency = time.Second
	h.simulate(s, "m", 100, 10*time.Millisecond, lat)
	got = h.simulate(s, "m", 3000, 10*time.Millisecond, lat)
	if sc := share(got, "cheap"); sc > 0.5 {
		t.Fatalf("cheap 10x slower: cheap share %.3f, want the dear one preferred", sc)
	}

	// Balanced weighs both: the cheap one wins at equal latency ...
	h = newHarness(t, testConfig())
	s.Models["m"].Objective = "balanced"
	cheapLatency = 100 * time.Millisecond
	if sc := share(h.simulate(s, "m", 3000, 10*time.Millisecond, lat), "cheap"); sc < 0.6 {
		t.Fatalf("balanced, equal latency: cheap share %.3f", sc)
	}
	// ... and deployments without a price count as the pool's median.
	p := h.pickOf(&catalog.Model{Objective: "cost"}, dep("x", "m", price(1, 1)), dep("y", "m"), dep("z", "m", price(3, 3)))
	lt, w := make([]float64, 3), make([]float64, 3)
	NewAdaptive(testConfig()).Weights(p, lt, w)
	if math.Abs(w[1]/w[0]-0.5) > 1e-9 || math.Abs(w[2]/w[0]-1.0/3) > 1e-9 {
		t.Fatalf("weights %v: the unpriced one should cost the median (2)", w)
	}
}

// The deployment that last served a session gets the warm-cache bonus; a
// cooldown takes it away, for good, until it serves the session again.
func TestAdaptiveWarmCacheBonus(t *testing.T) {
	cfg := testConfig()
	cfg.SessionKeeping = false // the bonus alone, no pin
	h := newHarness(t, cfg)
	s := snap(map[string]string{"m": "adaptive/latency"}, dep("a", "m"), dep("b", "m"))
	h.setLatency("a", 100*time.Millisecond)
	h.setLatency("b", 100*time.Millisecond)
	session := func(in *PlanInput) { in.Session = "team/s" }
	// measure selections for the session without feeding anything back
	measure := func() float64 {
		n := 0
		for range 4000 {
			a, _ := h.plan(s, "m", session).Next()
			if a.Deployment.ID == "b" {
				n++
			}
			a.Done(Outcome{Class: ClassCanceled})
		}
		return float64(n) / 4000
	}
	if sb := measure(); math.Abs(sb-0.5) > 0.04 {
		t.Fatalf("no warm cache yet: b share %.3f", sb)
	}
	p := h.plan(s, "m", session)
	for {
		a, _ := p.Next()
		if a.Deployment.ID == "b" {
			a.Done(ok())
			break
		}
		a.Done(fail(ClassBadRequest, 400))
		p = h.plan(s, "m", session)
	}
	if sb := measure(); math.Abs(sb-0.8) > 0.04 {
		t.Fatalf("b warm (x4): share %.3f, want 0.8", sb)
	}
	h.feed("b", h.clock.Now(), Outcome{Class: ClassRateLimited})
	if sb := measure(); sb != 0 {
		t.Fatalf("b cooling: share %.3f", sb)
	}
	h.clock.Advance(6 * time.Second)
	if sb := measure(); math.Abs(sb-0.5) > 0.04 {
		t.Fatalf("after the cooldown the bonus is gone: b share %.3f", sb)
	}
	h.clock.Advance(cfg.WarmCacheTTL + time.Second)
	if w := h.r.warmFor("team/s", "", h.r.tick(h.clock.Now())); w != "" {
		t.Fatalf("warm entry outlived its TTL: %s", w)
	}
}

// A pinned session stays on its deployment when a cheaper one appears and
// moves only when its deployment cools down.
func TestAdaptivePinnedSessionStays(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"m": "adaptive/cost"}, dep("dear", "m", price(10, 10)), dep("mid", "m", price(5, 5)))
	pin := "dear"
	pinned := func(in *PlanInput) { in.Session, in.SessionDeployment = "team/agent", pin }
	lat := func(string) time.Duration { return 100 * time.Millisecond }
	for range 100 {
		if id := h.serve(s, "m", lat, pinned); id != "dear" {
			t.Fatalf("pin moved to %s", id)
		}
	}
	// A far cheaper deployment joins the pool (a new snapshot).
	s2 := snap(map[string]string{"m": "adaptive/cost"}, dep("dear", "m", price(10, 10)), dep("mid", "m", price(5, 5)), dep("cheap", "m", price(0.1, 0.1)))
	for range 100 {
		if id := h.serve(s2, "m", lat, pinned); id != "dear" {
			t.Fatalf("pin moved to %s for a cheaper deployment", id)
		}
	}
	// Unpinned traffic goes to the cheap one.
	if id := h.serve(s2, "m", lat); id != "cheap" {
		t.Logf("unpinned request went to %s", id) // random, but overwhelmingly cheap
	}
	h.feed("dear", h.clock.Now(), Outcome{Class: ClassRateLimited})
	p := h.plan(s2, "m", pinned)
	a, _ := p.Next()
	a.Done(ok())
	res := p.Result()
	if res.Affinity != AffinityReleased || res.SessionDeployment == "dear" {
		t.Fatalf("cooling pin: %+v", res)
	}
	pin = res.SessionDeployment
	h.clock.Advance(time.Minute) // dear is healthy again; the session stays where it went
	for range 50 {
		if id := h.serve(s2, "m", lat, pinned); id != pin {
			t.Fatalf("re-pinned session moved from %s to %s", pin, id)
		}
	}
}

// With one eligible candidate the selector is skipped.
func TestAdaptiveSingleCandidate(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.pickOf(&catalog.Model{}, dep("only", "m"))
	if got := NewAdaptive(testConfig()).Select(p); got != 0 {
		t.Fatalf("got %d", got)
	}
	if p.Rand.Uint64() != rand0() {
		t.Fatal("the selector drew randomness for a single candidate")
	}
}

func rand0() uint64 { return newTestRand().Uint64() }

// With session keeping off, the deployment another replica pinned for the
// session (the shared store's pin) still earns the warm-cache bonus on a
// node that never served the session itself (SPEC 9: warm pins are shared).
func TestAdaptiveWarmCacheFromSharedPin(t *testing.T) {
	cfg := testConfig()
	cfg.SessionKeeping = false
	h := newHarness(t, cfg)
	s := snap(map[string]string{"m": "adaptive/latency"}, dep("a", "m"), dep("b", "m"))
	h.setLatency("a", 100*time.Millisecond)
	h.setLatency("b", 100*time.Millisecond)
	shared := func(in *PlanInput) { in.Session, in.SessionDeployment = "team/other-node", "b" }
	n := 0
	for range 4000 {
		a, _ := h.plan(s, "m", shared).Next()
		if a.Deployment.ID == "b" {
			n++
		}
		a.Done(Outcome{Class: ClassCanceled})
	}
	if sb := float64(n) / 4000; math.Abs(sb-0.8) > 0.04 {
		t.Fatalf("shared warm pin (x4): b share %.3f, want 0.8", sb)
	}
	h.feed("b", h.clock.Now(), Outcome{Class: ClassRateLimited})
	if w := h.r.warmFor("team/other-node", "b", h.r.tick(h.clock.Now())); w != "" {
		t.Fatalf("a cooling deployment keeps no bonus: %s", w)
	}
}
