package routing

import (
	"testing"
	"time"
)

// TestSessionPinKeptWhileOverQuota: SPEC 8: "The pin is released only when
// its deployment enters cooldown". A pinned deployment that is only over its
// own RPM quota for the rest of this minute cannot take the request (SPEC 5),
// but the session keeps its pin: its next request, once the quota frees, goes
// back to the deployment that holds its prompt cache.
func TestSessionPinKeptWhileOverQuota(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"gpt": "round_robin"}, dep("A", "gpt"), dep("B", "gpt", rpm(1)))
	pinned := func(in *PlanInput) { in.Session, in.SessionDeployment = "team/s1", "B" }

	// the first request takes B's one request of this minute
	p := h.plan(s, "gpt", pinned)
	if order := run(p, func(string, int) Outcome { return ok() }); len(order) != 1 || order[0] != "B1" {
		t.Fatalf("first request: order %v", order)
	}

	// B is over quota, not cooling: another deployment serves, the pin stays
	p = h.plan(s, "gpt", pinned)
	order := run(p, func(string, int) Outcome { return ok() })
	res := p.Result()
	if len(order) != 1 || order[0] != "A1" {
		t.Fatalf("over quota: order %v", order)
	}
	if h.remaining("B") > 0 {
		t.Fatal("B cooling: not the case under test")
	}
	if res.SessionDeployment != "B" {
		t.Fatalf("session re-pinned to %q while B was only over its quota, want B", res.SessionDeployment)
	}
	if h.obs.count("affinity released") != 0 {
		t.Fatalf("pin counted as released: %v", h.obs.events)
	}

	// the next minute the session is back on B
	h.clock.Advance(time.Minute)
	p = h.plan(s, "gpt", func(in *PlanInput) { in.Session, in.SessionDeployment = "team/s1", res.SessionDeployment })
	if order := run(p, func(string, int) Outcome { return ok() }); len(order) != 1 || order[0] != "B1" {
		t.Fatalf("next minute: order %v", order)
	}
}
