package ratelimit

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/teamtest"
)

// TestSlotHeldUntilRequestDeadline: a node-local max_parallel slot whose
// release is lost is kept until past its request's own deadline, not only
// DefaultSlotTTL (11 minutes): with server.request_timeout 30m a stream
// still running at minute 12 kept its slot in name only, and a team of
// max_parallel 1 got a second request running beside it (SPEC 3). A
// request without a deadline keeps the default backstop.
func TestSlotHeldUntilRequestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		until    time.Duration // from the start; 0: none
		at       time.Duration // when the second request comes
		admitted bool
	}{
		{"deadline 30m, second at 12m: the first still runs", 30 * time.Minute, 12 * time.Minute, false},
		{"deadline 30m, second at 29m", 30 * time.Minute, 29 * time.Minute, false},
		{"deadline 30m, second past it and the margin", 30 * time.Minute, 31*time.Minute + time.Second, true},
		{"no deadline: the default backstop", 0, DefaultSlotTTL + time.Second, true},
		{"deadline 2m: the default backstop still holds", 2 * time.Minute, 5 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1_800_000_000, 0)
			now := start
			l := NewLocal(func() time.Time { return now }, 1)
			team := teamtest.Team("t", teamtest.Limits{Par: 1})
			a := Admission{RequestID: "r1", Team: team}
			if tc.until > 0 {
				a.Until = start.Add(tc.until)
			}
			d, err := l.Admit(context.Background(), a)
			if err != nil || !d.Allowed {
				t.Fatalf("first: %+v %v", d, err)
			}
			now = start.Add(tc.at)
			d2, err := l.Admit(context.Background(), Admission{RequestID: "r2", Team: team})
			if err != nil {
				t.Fatal(err)
			}
			if d2.Allowed != tc.admitted {
				t.Fatalf("second request admitted %v, want %v", d2.Allowed, tc.admitted)
			}
		})
	}
}
