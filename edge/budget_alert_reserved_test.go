package edge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/internal/fakeclock"
)

// TestBudgetAlertLeavesOutReservations: the alert (SPEC 3.1: "the first
// time a level's spend crosses" alert_at) is about money spent, not the
// reservations of requests still running, which admission adds to the
// level's spend. Nine requests in flight against $10 (alert at $8)
// reserve $9; the first to finish at $0.01 raised the period's one alert,
// and the real crossing later raised none. At the team and at a key level,
// in the local limiter and in Redis.
func TestBudgetAlertLeavesOutReservations(t *testing.T) {
	start := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	edgeStates(t, start, func(t *testing.T, st State, clk *fakeclock.Clock, settle func()) {
		var got []string
		st.SetBudgetAlert(func(team string, lv LevelKind, name string) { got = append(got, fmt.Sprint(lv, name)) })
		daily := config.Period{Calendar: config.PeriodDaily}
		team := budgetTeam("ra", 10, daily) // budgetTeam alerts at 80%: $8
		key := Level{Kind: LevelKey, ID: "key_1", Name: "ci", Limits: &config.Limits{Budget: config.Budget{USD: 10, Period: daily, AlertAt: 0.8}}}
		var running []Begun
		for i := range 9 {
			b, err := st.Begin(context.Background(), &Request{RequestID: fmt.Sprint(i), Team: team, CostUSD: 1, Key: key})
			if err != nil || !b.Decision.Allowed {
				t.Fatalf("admission %d: %+v %v", i, b.Decision, err)
			}
			running = append(running, b)
		}
		st.Finish(&running[0], &Outcome{Served: true, CostUSD: 0.01})
		settle()
		if len(got) != 0 {
			t.Fatalf("alerts %v at a real spend of $0.01 ($9 reserved by requests still running)", got)
		}
		for i := 1; i < 9; i++ { // $1 each, as reserved: $7.01 after the eighth, $8.01 after the ninth
			st.Finish(&running[i], &Outcome{Served: true, CostUSD: 1})
			settle()
			if i < 8 && len(got) != 0 {
				t.Fatalf("alerts %v at a real spend of $%.2f", got, 0.01+float64(i))
			}
		}
		if len(got) != 2 {
			t.Fatalf("alerts %v at the real crossing, want the team's and the key's", got)
		}
	})
}
