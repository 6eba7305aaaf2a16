package edge

import (
	"context"
	"testing"

	"switchyard/internal/teamtest"
	"switchyard/ratelimit"
)

// TestOutageCountsSharedBudgetReservations: SPEC 3.1 and 9 (a decision is
// shared or local, never both; spend passes a budget only by what
// estimates missed): when Redis becomes unreachable while this node's
// requests admitted in Redis still run, the local fallback counts what
// they reserved there against its share of each budget, at every level.
// Before, it counted only what this node's finished requests had spent,
// so it admitted its whole share again on top of the running
// reservations: with a $10 budget and $8 reserved, two more $4 requests.
// Once the running requests end, their real cost counts instead.
func TestOutageCountsSharedBudgetReservations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		divisor   int
		team      teamtest.Limits
		key, user teamtest.Limits
		running   int // $4 requests admitted in Redis, running when Redis goes away
		want      int // $4 requests admitted locally afterwards
		level     int // the level a refusal names
		after     int // $4 requests admitted locally once the running ones cost $1 each
	}{
		{name: "team", divisor: 1, team: teamtest.Limits{USD: 10}, running: 2, want: 0, after: 2},
		{name: "team, one running", divisor: 1, team: teamtest.Limits{USD: 10}, running: 1, want: 1, after: 1},
		{name: "key", divisor: 1, key: teamtest.Limits{USD: 10}, running: 2, want: 0, level: int(LevelKey), after: 2},
		{name: "user", divisor: 1, user: teamtest.Limits{USD: 10}, running: 1, want: 1, level: int(LevelUser), after: 1},
		{name: "share of two replicas", divisor: 2, team: teamtest.Limits{USD: 20}, running: 1, want: 1, after: 1},
		{name: "share already reserved", divisor: 2, team: teamtest.Limits{USD: 20}, running: 3, want: 0, after: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{Divisor: tc.divisor}, false)
			team := teamtest.Team("usd", tc.team)
			q := &Request{RequestID: "r", Team: team, Tokens: 1, CostUSD: 4,
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
			admitLocally := func() (int, ratelimit.Decision) {
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
				return n, refused
			}
			n, refused := admitLocally()
			if n != tc.want {
				t.Fatalf("%d admitted locally while %d admitted in Redis still hold $%d, want %d", n, tc.running, 4*tc.running, tc.want)
			}
			if refused.Kind != ratelimit.KindBudget || refused.Level != tc.level || refused.RetryAfter <= 0 {
				t.Fatalf("refusal %+v, want budget at level %d with a Retry-After", refused, tc.level)
			}
			// they end, each having cost $1: their reservations give way to
			// their real cost
			for i := range running {
				g.r.Finish(&running[i], &Outcome{Served: true, CostUSD: 1})
			}
			if n, _ := admitLocally(); n != tc.after {
				t.Fatalf("%d admitted locally once the running requests spent $%d, want %d", n, tc.running, tc.after)
			}
		})
	}
}

// BenchmarkBudgetBeginCPU is BenchmarkBeginCPU for a team with a budget:
// Begin holds the request's reservation for the fallback and Finish takes
// it back (sharedSpend), with no lock and no allocation of their own.
func BenchmarkBudgetBeginCPU(b *testing.B) {
	r := newRedis(cannedClient{}, nil, Config{OneShard: true}, nil, nil, nil, nil)
	team := teamtest.Team("usd", teamtest.Limits{RPM: 1e8, TPM: 1e11, USD: 1e9})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		bg, err := r.Begin(ctx, &Request{RequestID: "r", Team: team, Tokens: 25, CostUSD: 0.01})
		if err != nil || !bg.Decision.Allowed || bg.Local {
			b.Fatal(err, bg.Decision.Allowed, bg.Local)
		}
		r.Finish(&bg, &Outcome{Served: true, Deployment: "mock-1", PromptTokens: 9, CompletionTokens: 16, CostUSD: 0.005})
	}
}
