package routing

import (
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/internal/fakeclock"
	"switchyard/ratelimit"
)

// An attempt handed out and then withdrawn (never sent: the retry_after wait
// did not fit the deadline, SPEC 7.1) was never a request to the
// deployment: it must not keep counting against the deployment's own RPM/TPM
// quota (SPEC 5: "under their own RPM/TPM quota"), or a later request finds
// the deployment over quota for up to a minute.
func TestHostile5WithdrawnAttemptFreesQuota(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait time.Duration // between the hand-out and the withdrawal (the retry_after wait)
	}{
		{"at once", 0},
		{"after a wait into the next seconds", 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := snap(nil, dep("A", "m", rpm(1)))
			p := h.plan(s, "m")
			a, more := p.Next()
			if !more {
				t.Fatal("no first attempt")
			}
			h.clock.Advance(tc.wait)
			a.Withdraw()
			p2 := h.plan(s, "m")
			b, more := p2.Next()
			if !more {
				t.Fatalf("after a withdrawn attempt the deployment is over its quota (retry after %v)", p2.Result().RetryAfter)
			}
			b.Done(ok())
			// The request sent counts: the next one is over the quota.
			p3 := h.plan(s, "m")
			if _, more := p3.Next(); more {
				t.Fatal("a sent request did not count against the quota")
			}
		})
	}
}

// When only quotas stand in the way the client is told to come back when
// the deployment's sliding minute has room again: when enough of its oldest
// counted requests leave the window (LocalUsage counts the last 60
// one-second slots), not at the next wall-clock minute, which can be almost
// a minute early or late.
func TestHostile5QuotaRetryAfterFollowsSlidingWindow(t *testing.T) {
	start := t0.Add(25 * time.Second) // 12:00:25
	for _, tc := range []struct {
		name     string
		rpm, tpm int64
		records  []time.Duration // since start, 200 tokens each
		at       time.Duration   // since start, when the request comes
		want     time.Duration
	}{
		// 12:00:25 and 12:00:50 counted; at 12:01:05 the 12:00:25 one leaves at 12:01:25.
		{"rpm one leaves", 2, 0, []time.Duration{0, 25 * time.Second}, 40 * time.Second, 20 * time.Second},
		// three counted, room for one more needs two to leave: 12:00:30 leaves at 12:01:30.
		{"rpm two leave", 2, 0, []time.Duration{0, 5 * time.Second, 25 * time.Second}, 40 * time.Second, 25 * time.Second},
		// 400 tokens counted, 200 more do not fit 450 until 12:00:25 leaves.
		{"tpm", 0, 450, []time.Duration{0, 25 * time.Second}, 40*time.Second + 300*time.Millisecond, 19*time.Second + 700*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeclock.New(start)
			u := ratelimit.NewLocalUsage(c.Now)
			r := NewRouter(testConfig(), c, 1, &recorder{}, u)
			d := dep("A", "m")
			d.RPM, d.TPM = tc.rpm, tc.tpm
			s := snap(nil, d)
			for _, at := range tc.records {
				c.Set(start.Add(at))
				u.Record("A", 200)
			}
			c.Set(start.Add(tc.at))
			p, err := r.Plan(PlanInput{Snapshot: s, Model: "m", MaxAttempts: 3, Profile: Profile{Op: catalog.OpChat, PromptTokens: 100, OutputTokens: 100}})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.Next(); ok {
				t.Fatal("attempt over quota")
			}
			if got := p.Result().RetryAfter; got != tc.want {
				t.Fatalf("retry after %v, want %v (when the window has room)", got, tc.want)
			}
			// And it is right: at that time the request goes through.
			c.Set(start.Add(tc.at + tc.want))
			p, _ = r.Plan(PlanInput{Snapshot: s, Model: "m", MaxAttempts: 3, Profile: Profile{Op: catalog.OpChat, PromptTokens: 100, OutputTokens: 100}})
			if _, ok := p.Next(); !ok {
				t.Fatal("no room after the wait reported")
			}
		})
	}
}
