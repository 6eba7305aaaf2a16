package ratelimit

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/teamtest"
)

// The local limiter reads the wall clock. When it steps back (NTP, a
// resumed VM), the TATs and slot expiries written before the step are that
// much further in the future: without a guard every team that had used
// its quota was refused for the size of the step (an hour's correction: an
// hour of 429s on a local-only node), and its Retry-After said so. A step
// back costs no more than the quota already used.
func TestHostile4LocalClockStepBack(t *testing.T) {
	for _, step := range []time.Duration{2 * time.Second, time.Minute, time.Hour} {
		clk := newFakeClock()
		l := NewLocal(clk.Now, 1)
		team := teamtest.Team("w", teamtest.Limits{RPM: 2, TPM: 1000})
		ctx := context.Background()
		for i := range 2 {
			if d, _ := l.Admit(ctx, Admission{RequestID: reqID(i), Team: team, Tokens: 10}); !d.Allowed {
				t.Fatalf("request %d of rpm 2 refused", i)
			}
		}
		clk.Advance(-step)
		d, _ := l.Admit(ctx, Admission{RequestID: "3", Team: team, Tokens: 10})
		if d.Allowed {
			t.Fatalf("step %v: a third request within the minute admitted", step)
		}
		if d.RetryAfter > Window || d.ResetRequests > Window {
			t.Fatalf("step %v: Retry-After %v, reset %v, want at most %v", step, d.RetryAfter, d.ResetRequests, Window)
		}
		clk.Advance(30 * time.Second)
		if d, _ := l.Admit(ctx, Admission{RequestID: "4", Team: team, Tokens: 10}); !d.Allowed {
			t.Fatalf("step %v: refused half a minute later (capacity returns at rpm/60 a second)", step)
		}
	}
}
