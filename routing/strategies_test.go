package routing

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/ratelimit"
)

// pickOf builds a selection over deployments of model "m" whose live state
// lives in h's router.
func (h *harness) pickOf(m *catalog.Model, deps ...*catalog.Deployment) *Pick {
	p := &Pick{Model: m, Rand: newTestRand(), Now: h.clock.Now(), Profile: Profile{PromptTokens: 1000, OutputTokens: 500}}
	for _, d := range deps {
		p.Candidates = append(p.Candidates, Candidate{Deployment: d, State: h.r.State(d.ID)})
	}
	return p
}

// shares runs n selections and returns each deployment's share.
func shares(sel Selector, p *Pick, n int) map[string]float64 {
	count := map[string]int{}
	for range n {
		count[p.Candidates[sel.Select(p)].Deployment.ID]++
	}
	out := map[string]float64{}
	for id, c := range count {
		out[id] = float64(c) / float64(n)
	}
	return out
}

func (h *harness) setLatency(id string, d time.Duration) {
	st := h.r.State(id)
	st.mu.Lock()
	st.estimate.ns.Store(int64(d))
	st.estimate.at.Store(h.r.tick(h.clock.Now()))
	st.mu.Unlock()
}

func TestStrategiesRegistered(t *testing.T) {
	if got := Strategies(); !slices.Equal(got, slices.Sorted(slices.Values(config.Strategies))) {
		t.Fatalf("registered %v, config knows %v", got, config.Strategies)
	}
	h := newHarness(t, testConfig())
	for _, name := range config.Strategies {
		if s, got := h.r.selector(name); s == nil || got != name {
			t.Errorf("%s not registered", name)
		}
	}
	if _, got := h.r.selector("bogus"); got != "simple_shuffle" {
		t.Errorf("unknown strategy fell back to %s", got)
	}
}

func TestSimpleShuffleProportionalToWeight(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.pickOf(nil, dep("a", "m", weight(1)), dep("b", "m", weight(2)), dep("c", "m", weight(3)), dep("d", "m", weight(4)))
	got := shares(SimpleShuffle{}, p, 100_000)
	for id, want := range map[string]float64{"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4} {
		if math.Abs(got[id]-want) > 0.01 {
			t.Errorf("%s: share %.4f, want %.2f±0.01", id, got[id], want)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	h := newHarness(t, testConfig())
	rr := &RoundRobin{}
	m1, m2 := &catalog.Model{Name: "m1"}, &catalog.Model{Name: "m2"}
	p1 := h.pickOf(m1, dep("a", "m1"), dep("b", "m1"), dep("c", "m1"))
	p2 := h.pickOf(m2, dep("x", "m2"), dep("y", "m2"))
	var got []string
	for range 6 {
		got = append(got, p1.Candidates[rr.Select(p1)].Deployment.ID)
		if p1.Candidates[0].Deployment.ID == "a" { // interleave another model
			got = append(got, p2.Candidates[rr.Select(p2)].Deployment.ID)
		}
	}
	want := []string{"a", "x", "b", "y", "c", "x", "a", "y", "b", "x", "c", "y"}
	if !slices.Equal(got, want) {
		t.Fatalf("turns %v, want %v", got, want)
	}
}

func TestLeastBusy(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.pickOf(nil, dep("a", "m"), dep("b", "m"), dep("c", "m"))
	h.r.State("a").inflight.Store(3)
	h.r.State("b").inflight.Store(1)
	h.r.State("c").inflight.Store(1)
	got := shares(LeastBusy{}, p, 10_000)
	if got["a"] != 0 || math.Abs(got["b"]-0.5) > 0.03 {
		t.Fatalf("shares %v: want b and c evenly, never a", got)
	}
	h.r.State("c").inflight.Store(0)
	if got := shares(LeastBusy{}, p, 100); got["c"] != 1 {
		t.Fatalf("shares %v, want c", got)
	}
}

func TestLatencyBased(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.pickOf(nil, dep("a", "m"), dep("b", "m"), dep("c", "m"))
	h.setLatency("a", 100*time.Millisecond)
	h.setLatency("b", 108*time.Millisecond) // within 10%
	h.setLatency("c", 130*time.Millisecond)
	got := shares(LatencyBased{Buffer: 0.10}, p, 10_000)
	if got["c"] != 0 || got["a"] < 0.45 || got["b"] < 0.45 {
		t.Fatalf("shares %v: want a and b at random, never c", got)
	}
	if got := shares(LatencyBased{Buffer: 0}, p, 1000); got["a"] != 1 {
		t.Fatalf("no buffer: %v", got)
	}
}

func TestCostBased(t *testing.T) {
	h := newHarness(t, testConfig())
	cheap, dear, unpriced := dep("cheap", "m", price(0.15, 0.6)), dep("dear", "m", price(2.5, 10)), dep("unpriced", "m")
	p := h.pickOf(nil, dear, unpriced, cheap)
	if got := shares(CostBased{}, p, 1000); got["cheap"] != 1 {
		t.Fatalf("shares %v, want the cheapest", got)
	}
	// Unpriced counts as the median price: between cheap and dear.
	p = h.pickOf(nil, dear, unpriced, dep("mid", "m", price(1, 4)))
	if got := shares(CostBased{}, p, 1000); got["mid"] != 1 {
		t.Fatalf("shares %v: the unpriced deployment must cost the median, not zero", got)
	}
	p = h.pickOf(nil, dep("x", "m", price(1, 1)), dep("y", "m", price(1, 1)), dear)
	if got := shares(CostBased{}, p, 10_000); got["dear"] != 0 || got["x"] < 0.45 || got["y"] < 0.45 {
		t.Fatalf("ties: %v", got)
	}
	// The price is taken at the request's estimated tokens.
	in, out := dep("in", "m", price(10, 0.1)), dep("out", "m", price(0.1, 10))
	p = h.pickOf(nil, in, out)
	p.Profile = Profile{PromptTokens: 10, OutputTokens: 5000}
	if got := shares(CostBased{}, p, 100); got["in"] != 1 {
		t.Fatalf("output-heavy request: %v", got)
	}
	p.Profile = Profile{PromptTokens: 50000, OutputTokens: 10}
	if got := shares(CostBased{}, p, 100); got["out"] != 1 {
		t.Fatalf("prompt-heavy request: %v", got)
	}
}

func TestUsageBased(t *testing.T) {
	h := newHarness(t, testConfig())
	u := ratelimit.NewLocalUsage(h.clock.Now)
	a := dep("a", "m", rpm(100))
	b := dep("b", "m", func(d *catalog.Deployment) { d.TPM = 10_000 })
	p := h.pickOf(nil, a, b)
	for range 50 {
		u.Record("a", 0) // 50% of its RPM
	}
	u.Record("b", 2_000) // 20% of its TPM
	sel := &UsageBased{Source: u}
	if got := shares(sel, p, 100); got["b"] != 1 {
		t.Fatalf("shares %v, want b", got)
	}
	u.Record("b", 6_000) // 80%
	if got := shares(sel, p, 100); got["a"] != 1 {
		t.Fatalf("shares %v, want a", got)
	}
	p = h.pickOf(nil, a, dep("free", "m"))
	if got := shares(sel, p, 100); got["free"] != 1 {
		t.Fatalf("a deployment without quota has used none of it: %v", got)
	}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(7, 9)) }

// The latency buffer is measured from the best, not from whichever
// candidate came first.
func TestLatencyBufferFromTheBest(t *testing.T) {
	h := newHarness(t, testConfig())
	p := h.pickOf(nil, dep("a", "m"), dep("b", "m"), dep("c", "m"))
	h.setLatency("a", 108*time.Millisecond)
	h.setLatency("b", 100*time.Millisecond)
	h.setLatency("c", 117*time.Millisecond)
	if got := shares(LatencyBased{Buffer: 0.10}, p, 10_000); got["c"] != 0 || got["a"] < 0.45 {
		t.Fatalf("shares %v", got)
	}
}

// Two routers with the same seed make the same choices.
func TestSeededDeterminism(t *testing.T) {
	s := snap(map[string]string{"m": "simple_shuffle"}, dep("a", "m"), dep("b", "m"), dep("c", "m"), dep("d", "m"))
	seq := func() []string {
		h := newHarness(t, testConfig())
		var out []string
		for range 50 {
			out = append(out, h.serve(s, "m", func(string) time.Duration { return time.Millisecond }))
		}
		return out
	}
	if a, b := seq(), seq(); !slices.Equal(a, b) {
		t.Fatalf("same seed, different choices:\n%v\n%v", a, b)
	}
}
