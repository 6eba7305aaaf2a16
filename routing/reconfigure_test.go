package routing

import (
	"testing"
	"time"
)

// TestReconfigureKeepsLiveState: a reload changes the knobs, and the
// deployment states (cooldown, streak, in-flight) carry over by id.
func TestReconfigureKeepsLiveState(t *testing.T) {
	h := newHarness(t, testConfig())
	h.feed("a", h.clock.Now(), Outcome{Class: ClassRateLimited}) // a cools for 5s
	h.r.State("b").inflight.Add(1)
	cfg := testConfig()
	cfg.CooldownBase = time.Second
	cfg.CooldownMax = time.Minute
	cfg.DefaultStrategy = "least_busy"
	old := h.r
	h.r = old.Reconfigure(cfg)
	if h.r.State("a") != old.State("a") {
		t.Fatal("deployment state must be the same object after a reload")
	}
	if got := h.remaining("a"); got != 5*time.Second {
		t.Fatalf("cooldown left %v after reload, want the 5s it had", got)
	}
	if got := h.r.State("b").inflight.Load(); got != 1 {
		t.Fatalf("in-flight %d after reload, want 1", got)
	}
	if _, name := h.r.selector("unknown-model"); name != "least_busy" {
		t.Fatalf("default strategy %q after reload", name)
	}
	// the new knobs apply to the next cooldown: a 429 on c cools for 1s
	h.feed("c", h.clock.Now(), Outcome{Class: ClassRateLimited})
	if got := h.remaining("c"); got != time.Second {
		t.Fatalf("new cooldown_base not applied: %v", got)
	}
}

// TestReconfigureAppliesWarmCacheTTL: warm_cache_ttl is a routing knob a
// reload applies live (SPEC 11), while the warm-cache memory itself carries
// over: a session served before the reload is warm for the new TTL.
func TestReconfigureAppliesWarmCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new time.Duration
		advance  time.Duration
		want     string
	}{
		{"shortened: past the new ttl", 5 * time.Minute, time.Minute, 2 * time.Minute, ""},
		{"shortened: within the new ttl", 5 * time.Minute, time.Minute, 30 * time.Second, "a"},
		{"lengthened: past the old ttl", time.Minute, 10 * time.Minute, 2 * time.Minute, "a"},
		{"lengthened: past the new ttl", time.Minute, 10 * time.Minute, 11 * time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.WarmCacheTTL = tc.old
			h := newHarness(t, cfg)
			h.r.warm.put("team:id:s1", "a", h.r.tick(h.clock.Now()), int64(tc.old))
			cfg.WarmCacheTTL = tc.new
			r := h.r.Reconfigure(cfg)
			h.clock.Advance(tc.advance)
			if got := r.warmFor("team:id:s1", "", r.tick(h.clock.Now())); got != tc.want {
				t.Fatalf("warm deployment %q %v after the reload, want %q", got, tc.advance, tc.want)
			}
		})
	}
}
