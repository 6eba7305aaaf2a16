package edge

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestUsage: the usage read agrees between the local state and the Redis
// script, through admissions, a reconcile with spend, a release and refill.
func TestUsage(t *testing.T) {
	for _, impl := range []struct {
		name   string
		env    func(*testing.T) env
		shared bool
	}{{"local", localEnv, false}, {"redis", miniEnv, true}} {
		t.Run(impl.name, func(t *testing.T) {
			e := impl.env(t)
			team := newTeam("u", limitsOf{rpm: 60, tpm: 6000, par: 5, usd: 10, period: time.Hour})
			read := func(step string, rpm, tpm, inflight int64, spent float64) {
				t.Helper()
				u, err := e.st.Usage(context.Background(), team)
				if err != nil {
					t.Fatal(err)
				}
				if u.Shared != impl.shared || u.RPMUsed != rpm || u.TPMUsed != tpm || u.InFlight != inflight || math.Abs(u.SpentUSD-spent) > 1e-9 || u.ResetsAt.IsZero() {
					t.Fatalf("%s: %+v, want rpm %d tpm %d in flight %d spent %g", step, u, rpm, tpm, inflight, spent)
				}
			}
			read("fresh", 0, 0, 0, 0)
			var bs []Begun
			for range 3 {
				bs = append(bs, begin(t, e.st, team, 100))
			}
			read("admitted", 3, 300, 3, 0)
			e.st.Finish(&bs[0], &Outcome{Served: true, PromptTokens: 50, CostUSD: 0.5})
			e.settle(t)
			read("reconciled", 3, 250, 2, 0.5)
			e.advance(time.Second) // rpm 60: one request back; tpm 6000: 100 tokens back
			read("refilled", 2, 150, 2, 0.5)
			e.check(t)
		})
	}
}
