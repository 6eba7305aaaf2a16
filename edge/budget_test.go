package edge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/internal/fakeclock"
	"switchyard/internal/redistest"
	"switchyard/ratelimit"
	"switchyard/telemetry"
)

// windowProbe runs periodLua's window alone.
const windowProbe = tatLua + periodLua + `
local id, e = window(tonumber(ARGV[1]), tonumber(ARGV[2]))
return {id, e}
`

// TestWindowParity: the scripts' budget windows (Redis's clock) and the
// local limiter's (ratelimit.PeriodWindow) agree on every boundary: UTC
// midnight, Monday, month ends, leap days, year ends, and random times.
func TestWindowParity(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var times []time.Time
	for _, s := range []string{
		"2026-12-06T23:59:59.999999Z", "2026-12-07T00:00:00Z", // Sunday -> Monday
		"2026-12-31T23:59:59.999999Z", "2027-01-01T00:00:00Z",
		"2028-02-28T23:59:59Z", "2028-02-29T12:00:00Z", "2028-03-01T00:00:00Z",
		"2027-02-28T23:59:59.999999Z", "2027-03-01T00:00:00Z",
		"2000-02-29T00:00:00Z", "2100-03-01T00:00:00Z", "1970-01-05T00:00:00Z", "1970-01-04T23:59:59Z",
	} {
		times = append(times, utc(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		times = append(times, time.Unix(0, rng.Int64N(int64(100*365*24*time.Hour))).UTC())
	}
	codes := []int64{86400, 3600, 2592000, 7, ratelimit.PeriodCode(config.Period{Calendar: config.PeriodWeekly}),
		ratelimit.PeriodCode(config.Period{Calendar: config.PeriodMonthly})}
	check := func(t *testing.T, c redis.Scripter) {
		s := redis.NewScript(windowProbe)
		for _, tm := range times {
			now := tm.UnixMicro()
			for _, code := range codes {
				v, err := s.Run(context.Background(), c, nil, now, code).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				id, end := ratelimit.PeriodWindow(now*1000, code)
				if v[0] != id || v[1] != end/1000 {
					t.Fatalf("%s code %d: script (%d, %s), Go (%d, %s)", tm.Format(time.RFC3339Nano), code,
						v[0], time.UnixMicro(v[1]).UTC(), id, time.Unix(0, end).UTC())
				}
			}
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		defer c.Close()
		check(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Start(t).Client()
		check(t, c)
	})
	// and the windows are the calendar's
	for _, tc := range []struct {
		code     int64
		at, ends string
	}{
		{86400, "2026-12-05T13:00:00Z", "2026-12-06T00:00:00Z"},
		{codes[4], "2026-12-05T13:00:00Z", "2026-12-07T00:00:00Z"}, // a Saturday: next Monday
		{codes[4], "2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z"},
		{codes[5], "2026-12-05T13:00:00Z", "2027-01-01T00:00:00Z"},
		{codes[5], "2028-02-10T00:00:00Z", "2028-03-01T00:00:00Z"},
	} {
		_, end := ratelimit.PeriodWindow(utc(tc.at).UnixNano(), tc.code)
		if got := time.Unix(0, end).UTC(); !got.Equal(utc(tc.ends)) {
			t.Errorf("code %d at %s ends %s, want %s", tc.code, tc.at, got, tc.ends)
		}
	}
}

// budgetTeam is a team with only a budget of usd per period.
func budgetTeam(name string, usd float64, p config.Period) *catalog.Team {
	return &catalog.Team{Team: config.Team{Name: name, Budget: config.Budget{USD: usd, Period: p}}}
}

// edgeStates runs f against the local edge state and the Redis one
// (miniredis), each on its own fake clock starting at start.
func edgeStates(t *testing.T, start time.Time, f func(t *testing.T, st State, clk *fakeclock.Clock, settle func())) {
	t.Run("local", func(t *testing.T) {
		clk := fakeclock.New(start)
		f(t, NewLocal(clk.Now, telemetry.NewRing(10)), clk, func() {})
	})
	t.Run("redis", func(t *testing.T) {
		g := newMiniRig(t, Config{}, false)
		g.clk.Set(start)
		g.m.SetTime(start)
		f(t, g.r, g.clk, func() {
			g.m.SetTime(g.clk.Now())
			g.step(t)
		})
	})
}

// Issue 26 reproduction: the budget was checked at admission but charged
// only after the response, so 100 concurrent requests against $0.50 spent
// $2.60. Now each admission reserves its highest possible cost: against a
// budget covering 3 such requests, 20 arriving together admit exactly 3;
// the finish replaces each reservation by the real cost, which frees room
// for more.
func TestBudgetReservesAtAdmission(t *testing.T) {
	start := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	edgeStates(t, start, func(t *testing.T, st State, clk *fakeclock.Clock, settle func()) {
		team := budgetTeam("b", 0.30, config.Period{Calendar: config.PeriodDaily})
		var held []Begun
		refused := 0
		for i := range 20 {
			b, err := st.Begin(context.Background(), &Request{RequestID: fmt.Sprint(i), Team: team, CostUSD: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			if b.Decision.Allowed {
				held = append(held, b)
				continue
			}
			refused++
			if b.Decision.Kind != ratelimit.KindBudget || b.Decision.RetryAfter != 11*time.Hour {
				t.Fatalf("refusal %+v, want budget with Retry-After to midnight UTC (11h)", b.Decision)
			}
		}
		if len(held) != 3 || refused != 17 {
			t.Fatalf("admitted %d of 20 against a budget covering 3", len(held))
		}
		for i := range held { // each really cost half its bound
			st.Finish(&held[i], &Outcome{Served: true, CostUSD: 0.05})
		}
		settle()
		// spent 0.15: one more fits (0.25), the next does not (0.35)
		for i, want := range []bool{true, false} {
			b, _ := st.Begin(context.Background(), &Request{RequestID: "late", Team: team, CostUSD: 0.1})
			if b.Decision.Allowed != want {
				t.Fatalf("after reconciling, request %d allowed=%v, want %v", i, b.Decision.Allowed, want)
			}
		}
		clk.Advance(11*time.Hour + time.Second) // past midnight UTC: a new day
		settle()
		if b, _ := st.Begin(context.Background(), &Request{RequestID: "next-day", Team: team, CostUSD: 0.1}); !b.Decision.Allowed {
			t.Fatalf("a new day's budget refused: %+v", b.Decision)
		}
	})
}

// Calendar periods reset at their UTC boundary: a week on Monday 00:00, a
// month on the 1st; an unserved request gives its reservation back.
func TestBudgetCalendarResets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period string
		start  time.Time
		reset  time.Duration
	}{
		{"weekly", config.PeriodWeekly, time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC), time.Hour}, // a Sunday
		{"monthly", config.PeriodMonthly, time.Date(2027, 2, 28, 22, 0, 0, 0, time.UTC), 2 * time.Hour},
		{"duration", "", time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC), 24 * time.Hour}, // 72h windows from the epoch: day 20,792 is the third of one
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := config.Period{Calendar: tc.period}
			if tc.period == "" {
				p = config.Period{Every: 72 * time.Hour}
			}
			edgeStates(t, tc.start, func(t *testing.T, st State, clk *fakeclock.Clock, settle func()) {
				team := budgetTeam("c", 1, p)
				b, _ := st.Begin(context.Background(), &Request{RequestID: "a", Team: team, CostUSD: 0.6})
				if !b.Decision.Allowed {
					t.Fatalf("first refused: %+v", b.Decision)
				}
				nb, _ := st.Begin(context.Background(), &Request{RequestID: "b", Team: team, CostUSD: 0.6})
				if nb.Decision.Allowed || nb.Decision.RetryAfter != tc.reset {
					t.Fatalf("second: %+v, want refused until the reset in %v", nb.Decision, tc.reset)
				}
				st.Finish(&b, &Outcome{}) // not served: the whole reservation comes back
				settle()
				if b2, _ := st.Begin(context.Background(), &Request{RequestID: "c", Team: team, CostUSD: 0.6}); !b2.Decision.Allowed {
					t.Fatalf("an unserved request's reservation was not given back: %+v", b2.Decision)
				}
				clk.Advance(tc.reset)
				settle()
				if b3, _ := st.Begin(context.Background(), &Request{RequestID: "d", Team: team, CostUSD: 0.6}); !b3.Decision.Allowed {
					t.Fatalf("the next period's budget refused: %+v", b3.Decision)
				}
			})
		})
	}
}

// SPEC 3.1: the first time a period's spend crosses budget.alert_at, the
// alert hook runs once (for the cluster with Redis: two nodes on one Redis
// raise it once between them), and again in the next period.
func TestBudgetAlertOncePerPeriod(t *testing.T) {
	start := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	team := &catalog.Team{Team: config.Team{Name: "al", Budget: config.Budget{USD: 10, Period: config.Period{Calendar: config.PeriodDaily}, AlertAt: 0.05}}} // alerts at $0.50
	run := func(t *testing.T, states []State, clk *fakeclock.Clock, settle func()) {
		var alerts []string
		for _, st := range states {
			st.SetBudgetAlert(func(team string, _ LevelKind, _ string) { alerts = append(alerts, team) })
		}
		spend := func(usd float64) {
			for i, st := range states {
				b, _ := st.Begin(context.Background(), &Request{RequestID: fmt.Sprint(i), Team: team, CostUSD: usd})
				if !b.Decision.Allowed {
					t.Fatalf("refused: %+v", b.Decision)
				}
				st.Finish(&b, &Outcome{Served: true, CostUSD: usd * 0.9}) // less than reserved, as usual
			}
			settle()
		}
		spend(0.2) // $0.18 spent per node: under $0.50 in all with Redis ($0.36) and on each node
		if len(alerts) != 0 {
			t.Fatalf("alert below alert_at: %v", alerts)
		}
		spend(0.4) // crosses: $1.08 in all, $0.54 per node
		spend(0.01)
		want := len(states) // local-only: once per node
		if _, shared := states[0].(*Redis); shared {
			want = 1
		}
		if len(alerts) != want {
			t.Fatalf("%d alerts (%v), want %d", len(alerts), alerts, want)
		}
		clk.Advance(11 * time.Hour) // the next day
		settle()
		spend(0.6)
		if len(alerts) != 2*want {
			t.Fatalf("the next period's crossing raised %d alerts in all, want %d", len(alerts), 2*want)
		}
	}
	t.Run("local", func(t *testing.T) {
		clk := fakeclock.New(start)
		run(t, []State{NewLocal(clk.Now, telemetry.NewRing(10))}, clk, func() {})
	})
	t.Run("redis, two nodes", func(t *testing.T) {
		g := newMiniRig(t, Config{}, false)
		g.clk.Set(start)
		g.m.SetTime(start)
		other := newRedis(g.c, nil, Config{Prefix: "sy:", Timeout: time.Second, Clock: g.clk.Now}, nil, nil, nil, nil)
		run(t, []State{g.r, other}, g.clk, func() {
			g.m.SetTime(g.clk.Now())
			g.step(t)
			other.w.step(context.Background(), g.clk.Now())
		})
	})
}
