package edge

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/teamtest"
	"switchyard/ratelimit"
)

// TestBudgetRefusalBlocksOnlyWhatDoesNotFit: SPEC 3.1 and 9. When Redis
// refuses a reservation for budget, the local fallback learns it (learn:
// a budget block until the period resets), so during an outage it does
// not admit what the cluster has already spent. A refusal says only that
// this reservation did not fit: before, the block refused every request
// of the level until the period's end, so after one large request was
// refused ($5 against $4 left), a $1 request was refused locally for up
// to 720 h of an outage. Now a request at least as large as one Redis
// refused is still refused by the block, and a smaller one is left to the
// fallback's own share.
func TestBudgetRefusalBlocksOnlyWhatDoesNotFit(t *testing.T) {
	budget := teamtest.Limits{USD: 10, Period: 24 * time.Hour}
	for _, tc := range []struct {
		name      string
		team      teamtest.Limits
		key, user teamtest.Limits
		level     int
	}{
		{name: "team", team: budget, level: int(LevelTeam)},
		{name: "key", key: budget, level: int(LevelKey)},
		{name: "user", user: budget, level: int(LevelUser)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			// another node shares the Redis and reserves $6 there (still running)
			other := newRedis(g.c, nil, Config{Prefix: "sy:", Clock: g.clk.Now, Timeout: time.Second}, nil, nil, nil, nil)
			team := teamtest.Team("blk", tc.team)
			req := func(usd float64) *Request {
				return &Request{RequestID: "r", Team: team, Tokens: 1, CostUSD: usd,
					Key:  Level{Kind: LevelKey, ID: "k1", Name: "ci", Limits: teamtest.Level(tc.key)},
					User: Level{Kind: LevelUser, ID: "ann", Name: "ann", Limits: teamtest.Level(tc.user)}}
			}
			ctx := context.Background()
			if b, err := other.Begin(ctx, req(6)); err != nil || !b.Decision.Allowed || b.Local {
				t.Fatalf("setup: %+v %v", b.Decision, err)
			}
			b, err := g.r.Begin(ctx, req(5))
			if err != nil || b.Local || b.Decision.Allowed || b.Decision.Kind != ratelimit.KindBudget {
				t.Fatalf("$5 against $4 left: %+v local %v %v, want refused for budget in Redis", b.Decision, b.Local, err)
			}
			g.up.down.Store(true)
			for _, step := range []struct {
				usd  float64
				want bool
			}{
				{usd: 1, want: true},    // fits what Redis had left
				{usd: 5, want: false},   // as large as what Redis refused
				{usd: 7.5, want: false}, // larger
				{usd: 2.5, want: true},  // smaller: left to the fallback's share
			} {
				b, err := g.r.Begin(ctx, req(step.usd))
				if err != nil || !b.Local {
					t.Fatalf("$%v: local %v %v", step.usd, b.Local, err)
				}
				if b.Decision.Allowed != step.want {
					t.Fatalf("$%v during the outage: %+v, want admitted %v", step.usd, b.Decision, step.want)
				}
				if !step.want && (b.Decision.Kind != ratelimit.KindBudget || b.Decision.Level != tc.level || b.Decision.RetryAfter < time.Minute) {
					t.Fatalf("$%v refused with %+v, want budget at level %d until the period resets", step.usd, b.Decision, tc.level)
				}
			}
		})
	}
}
