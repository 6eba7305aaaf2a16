package edge

import (
	"context"
	"testing"

	"switchyard/internal/teamtest"
	"switchyard/ratelimit"
)

// TestOutageCountsSharedSlotsStillRunning: SPEC 3 and 9 (a decision is
// shared or local, never both): when Redis becomes unreachable while this
// node's requests admitted in Redis still run, the local fallback counts
// their slots against its share of max_parallel, at every level. Before,
// it started from an empty slot set and admitted a whole share more: a
// node with max_parallel 2 ran 4 requests at once from the moment of the
// outage. The local fallback's own share (divisor) is kept.
func TestOutageCountsSharedSlotsStillRunning(t *testing.T) {
	for _, tc := range []struct {
		name      string
		divisor   int
		team      teamtest.Limits
		key, user teamtest.Limits
		running   int // admitted in Redis, still running when Redis goes away
		want      int // admitted locally afterwards
		level     int // the level a refusal names
	}{
		{name: "team", divisor: 1, team: teamtest.Limits{Par: 2}, running: 2, want: 0},
		{name: "team, one running", divisor: 1, team: teamtest.Limits{Par: 3}, running: 1, want: 2},
		{name: "key", divisor: 1, key: teamtest.Limits{Par: 2}, running: 2, want: 0, level: int(LevelKey)},
		{name: "user", divisor: 1, user: teamtest.Limits{Par: 2}, running: 1, want: 1, level: int(LevelUser)},
		{name: "share of two replicas", divisor: 2, team: teamtest.Limits{Par: 8}, running: 3, want: 1},
		{name: "share already held", divisor: 2, team: teamtest.Limits{Par: 8}, running: 4, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{Divisor: tc.divisor}, false)
			team := teamtest.Team("par", tc.team)
			q := &Request{RequestID: "r", Team: team, Tokens: 1,
				Key:  Level{Kind: LevelKey, ID: "k1", Name: "ci", Limits: teamtest.Level(tc.key)},
				User: Level{Kind: LevelUser, ID: "ann", Name: "ann", Limits: teamtest.Level(tc.user)}}
			var running []Begun
			for range tc.running {
				b, err := g.r.Begin(context.Background(), q)
				if err != nil || !b.Decision.Allowed || b.Local {
					t.Fatalf("setup: %+v %v", b.Decision, err)
				}
				running = append(running, b)
			}
			g.up.down.Store(true)
			n := 0
			var refused ratelimit.Decision
			for range 10 {
				b, err := g.r.Begin(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				if !b.Local {
					t.Fatal("decided in Redis while it is down")
				}
				if b.Decision.Allowed {
					n++
				} else {
					refused = b.Decision
				}
			}
			if n != tc.want {
				t.Fatalf("%d admitted locally while %d admitted in Redis still run, want %d", n, tc.running, tc.want)
			}
			if refused.Kind != ratelimit.KindParallel || refused.Level != tc.level || refused.RetryAfter <= 0 {
				t.Fatalf("refusal %+v, want parallel at level %d with a Retry-After", refused, tc.level)
			}
			// once they end, the fallback's whole share is there again
			for i := range running {
				g.r.Finish(&running[i], &Outcome{})
			}
			g.up.down.Store(false)
		})
	}
}
