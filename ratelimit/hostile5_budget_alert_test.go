package ratelimit

import (
	"context"
	"testing"

	"switchyard/config"
	"switchyard/internal/teamtest"
)

// TestBudgetAlertCountsSpendNotReservations: SPEC 3.1 raises a level's
// budget alert "the first time a level's spend crosses" budget.alert_at.
// Admission reserves each request's highest possible cost, and the
// reservations of requests still running are not spend: nine requests in
// flight against a $10 budget (alert at $8) reserve $9, and the first to
// finish, at a real cost of one cent, raised the period's one alert
// (spend $8.01 counted), so the real crossing later raised none. At every
// level, and with a sweep between admission and finish (a budget-only
// level with requests in flight is not at rest).
func TestBudgetAlertCountsSpendNotReservations(t *testing.T) {
	daily := config.Budget{USD: 10, Period: config.Period{Calendar: config.PeriodDaily}, AlertAt: 0.8}
	for _, tc := range []struct {
		name  string
		level int // 0 team, 1 key, 2 user
		sweep bool
	}{
		{name: "team", level: 0},
		{name: "key", level: 1},
		{name: "user", level: 2},
		{name: "user, swept while in flight", level: 2, sweep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			l := NewLocal(clk.Now, 1)
			var alerts []int
			l.SetBudgetAlert(func(_ string, level int, _ string) { alerts = append(alerts, level) })
			team := teamtest.Team("acme", teamtest.Limits{})
			a := Admission{Team: team, CostUSD: 1}
			if tc.level == 0 {
				team.Budget = daily
			} else {
				a.Levels[tc.level-1] = Level{Key: levelKey("acme", "ann"), Name: "ann", Limits: &config.Limits{Budget: daily}}
			}
			var running []Ticket
			for range 9 { // $9 reserved, nothing spent yet
				d, err := l.Admit(context.Background(), a)
				if err != nil || !d.Allowed {
					t.Fatalf("admission refused: %+v %v", d, err)
				}
				running = append(running, d.Ticket)
			}
			if tc.sweep {
				l.sweep()
			}
			for i, tk := range running[:8] { // $0.08 spent in all
				l.Reconcile(tk, 10, 0.01)
				if len(alerts) != 0 {
					t.Fatalf("alert after %d finished requests with $%.2f spent of $10 (alert at $8): reservations counted as spend", i+1, 0.01*float64(i+1))
				}
			}
			l.Reconcile(running[8], 10, 8) // the real crossing: $8.08
			if len(alerts) != 1 || alerts[0] != tc.level {
				t.Fatalf("alerts %v when the spend crossed $8, want one of level %d", alerts, tc.level)
			}
			// the spend itself is unchanged: reservations replaced by the costs
			lv := Level{Key: a.Levels[max(0, tc.level-1)].Key, Limits: a.Levels[max(0, tc.level-1)].Limits}
			u := l.Usage(team)
			if tc.level > 0 {
				u = l.LevelUsage(lv)
			}
			if u.SpentUSD < 8.0799 || u.SpentUSD > 8.0801 || !u.Alerted {
				t.Fatalf("usage %+v, want $8.08 spent and the alert marked", u)
			}
		})
	}
}
