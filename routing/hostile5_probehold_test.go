package routing

import (
	"testing"
	"time"
)

// TestHostile5RetryAfterHoldEndsWithItsCooldown: SPEC 6: "A cooldown that
// carries the upstream's Retry-After is not probed before that time has
// passed", and probes come every probe_interval (default a fifth of the
// current cooldown). A Retry-After longer than cooldown_max caps the
// cooldown at the max; once that cooldown is over, its hold on probes is
// over too. A later cooldown that carries no Retry-After (a 401, three
// 503s) is probed on its own interval. Before the fix the hour-long hold of
// the old 429 outlived its 5 m cooldown and kept every later cooldown of the
// next hour free of probes: a revoked key put back, or a recovered
// upstream, waited out the whole cooldown.
func TestHostile5RetryAfterHoldEndsWithItsCooldown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later []Outcome
		ok    bool // a success between the two cooldowns
	}{
		{"401 after a success", []Outcome{{Class: ClassAuth, Status: 401}}, true},
		{"401 without a success", []Outcome{{Class: ClassAuth, Status: 401}}, false},
		{"three 503s", []Outcome{fail(ClassServerError, 503), fail(ClassServerError, 503), fail(ClassServerError, 503)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			st := h.r.State("c")
			h.feed("c", h.clock.Now(), Outcome{Class: ClassRateLimited, Status: 429, RetryAfter: time.Hour})
			if got := h.remaining("c"); got != 5*time.Minute {
				t.Fatalf("429 with Retry-After 1h: cooldown %v, want cooldown_max 5m", got)
			}
			h.clock.Advance(5*time.Minute + time.Second) // the capped cooldown is over
			if tc.ok {
				h.feed("c", h.clock.Now(), ok())
				h.clock.Advance(10 * time.Minute)
			}
			for _, o := range tc.later {
				h.feed("c", h.clock.Now(), o)
			}
			cool := h.remaining("c")
			if cool == 0 {
				t.Fatal("no second cooldown: not the case under test")
			}
			h.clock.Advance(cool / 5) // probe_interval 0: a fifth of the cooldown
			if !st.probeReady(h.r.tick(h.clock.Now()), &h.r.rules) {
				t.Errorf("a %v cooldown without Retry-After admits no probe after %v: the ended cooldown's Retry-After hold (probes from %v after it) still applies",
					cool, cool/5, time.Duration(st.probeFrom.Load()-h.r.tick(h.clock.Now())))
			}
			if hl := h.r.Health(h.clock.Now()); len(hl) != 1 || hl[0].NextProbe.IsZero() {
				t.Errorf("admin health shows no next probe for the cooling deployment: %+v", hl)
			}
		})
	}
}
