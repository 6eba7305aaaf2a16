package ratelimit

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/teamtest"
)

// TestBudgetBlockRefusesOnlyWhatDoesNotFit: a budget block (BlockBudget:
// the shared store refused a reservation of from USD) refuses, until it
// ends, the reservations at least as large, at the team level and at a
// key or user level, live or at rest; a smaller one is left to the
// level's share (SPEC 3.1, 9). Before, any block refused every request
// of the level until the period reset. Blocks of one period keep the
// smallest reservation refused; one that ended gives way to the next.
func TestBudgetBlockRefusesOnlyWhatDoesNotFit(t *testing.T) {
	type block struct {
		after time.Duration // from the start
		from  float64
	}
	for _, tc := range []struct {
		name   string
		sub    bool
		rest   bool // the level is swept to rest between the blocks and the checks
		blocks []block
		at     time.Duration // the checks run this long after the start
		admit  []float64
		refuse []float64
	}{
		{name: "team", blocks: []block{{0, 5}}, admit: []float64{1, 4.99}, refuse: []float64{5, 7}},
		{name: "team, budget spent", blocks: []block{{0, 0}}, refuse: []float64{0.01, 1}},
		{name: "team, smallest refusal kept", blocks: []block{{0, 5}, {time.Minute, 3}, {2 * time.Minute, 4}}, admit: []float64{2}, refuse: []float64{3, 4}},
		{name: "team, ended block replaced", blocks: []block{{0, 1}, {3 * time.Hour, 5}}, at: 3 * time.Hour, admit: []float64{2}, refuse: []float64{5}},
		{name: "team, block ended", blocks: []block{{0, 1}}, at: 3 * time.Hour, admit: []float64{1, 5}},
		{name: "user", sub: true, blocks: []block{{0, 5}}, admit: []float64{1}, refuse: []float64{5}},
		{name: "user at rest", sub: true, rest: true, blocks: []block{{0, 5}, {time.Minute, 3}}, admit: []float64{1}, refuse: []float64{3}},
		{name: "user at rest, ended block replaced", sub: true, rest: true, blocks: []block{{0, 1}, {3 * time.Hour, 5}}, at: 3 * time.Hour, admit: []float64{2}, refuse: []float64{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			l := NewLocal(clk.Now, 1)
			budget := teamtest.Limits{USD: 100}
			team := teamtest.Team("acme", budget)
			key := levelKey("acme", "ann")
			a := Admission{RequestID: "r", Team: team}
			if tc.sub {
				team = teamtest.Team("acme", teamtest.Limits{})
				a = Admission{RequestID: "r", Team: team, Levels: [2]Level{{}, {Key: key, Limits: teamtest.Level(budget)}}}
			}
			for _, b := range tc.blocks {
				clk.Set(start.Add(b.after))
				name := "acme"
				if tc.sub {
					name = key
				}
				l.BlockBudget(name, tc.sub, clk.Now().Add(2*time.Hour).UnixNano(), b.from)
				if tc.rest {
					l.sweep()
				}
			}
			clk.Set(start.Add(tc.at))
			check := func(usd float64, want bool) {
				t.Helper()
				a.CostUSD = usd
				d, err := l.Admit(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != want {
					t.Fatalf("$%v: %+v, want admitted %v", usd, d, want)
				}
				if d.Allowed {
					l.Release(d.Ticket)
					l.Reconcile(d.Ticket, 0, 0) // not served: no spend left
				} else if d.Kind != KindBudget || d.RetryAfter <= 0 {
					t.Fatalf("$%v refused with %+v, want budget with a Retry-After", usd, d)
				}
			}
			for _, usd := range tc.refuse {
				check(usd, false)
			}
			for _, usd := range tc.admit {
				check(usd, true)
			}
		})
	}
}

// TestHeldSpendCountsAgainstTheShare: what the shared limiter reserved for
// this node's requests still running (Admission.HeldUSD, Level.HeldUSD)
// counts against the level's share of its budget like spend, without
// being charged: the fallback admits only what the share leaves beside it
// (SPEC 3.1, 9).
func TestHeldSpendCountsAgainstTheShare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		divisor int
		sub     bool
		held    float64
		cost    float64
		want    bool
	}{
		{name: "team fits", divisor: 1, held: 6, cost: 4, want: true},
		{name: "team over", divisor: 1, held: 6.5, cost: 4, want: false},
		{name: "team share of two", divisor: 2, held: 3, cost: 2, want: true},
		{name: "team share of two over", divisor: 2, held: 3, cost: 2.5, want: false},
		{name: "team share held whole", divisor: 1, held: 10, cost: 0, want: false},
		{name: "user fits", divisor: 1, sub: true, held: 6, cost: 4, want: true},
		{name: "user over", divisor: 1, sub: true, held: 8, cost: 4, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLocal(newFakeClock().Now, tc.divisor)
			budget := teamtest.Limits{USD: 10}
			a := Admission{RequestID: "r", Team: teamtest.Team("acme", budget), CostUSD: tc.cost, HeldUSD: tc.held}
			if tc.sub {
				a = Admission{RequestID: "r", Team: teamtest.Team("acme", teamtest.Limits{}), CostUSD: tc.cost,
					Levels: [2]Level{{}, {Key: levelKey("acme", "ann"), Limits: teamtest.Level(budget), HeldUSD: tc.held}}}
			}
			for range 2 { // held is not charged: the same answer twice
				d, err := l.Admit(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != tc.want {
					t.Fatalf("$%v with $%v held: %+v, want admitted %v", tc.cost, tc.held, d, tc.want)
				}
				l.Reconcile(d.Ticket, 0, 0)
			}
		})
	}
}
