package routing

import (
	"testing"
	"time"
)

// TestCooldownNeverShortened: an outcome that re-arms a cooldown (a
// last-resort attempt's 500s past the threshold, a 429 without
// Retry-After) never ends it, or lets probes in, before what was decided
// already: the upstream said Retry-After 8 s, and a probe before then
// earns another 429 (SPEC 6).
func TestCooldownNeverShortened(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later Outcome
		n     int
	}{
		{"500s past the threshold", Outcome{Class: ClassServerError, Status: 500}, 3},
		{"429 without retry-after", Outcome{Class: ClassRateLimited, Status: 429}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			base := h.clock.Now()
			h.feed("c", base, Outcome{Class: ClassRateLimited, Status: 429, RetryAfter: 8 * time.Second})
			until := base.Add(h.remaining("c"))
			h.clock.Advance(time.Second)
			for range tc.n {
				h.feed("c", h.clock.Now(), tc.later)
			}
			if got := h.clock.Now().Add(h.remaining("c")); got.Before(until) {
				t.Errorf("the cooldown ends %v after it began, before the %v first decided", got.Sub(base), until.Sub(base))
			}
			st := h.r.State("c")
			if pf := st.probeFrom.Load(); pf < h.r.tick(base.Add(8*time.Second)) {
				t.Errorf("probes allowed from %v after the 429, before its Retry-After of 8s", time.Duration(pf-h.r.tick(base)))
			}
		})
	}
}
