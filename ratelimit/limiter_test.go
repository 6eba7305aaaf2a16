package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// env is a limiter under test with its clock: the local GCRA on a fake
// clock, or the Redis scripts on miniredis whose TIME follows the same fake
// clock (SetTime: FastForward moves TTLs but not TIME).
type env struct {
	lim     Limiter
	advance func(time.Duration)
	check   func(t *testing.T)
}

func localEnv(t *testing.T) env {
	clk := newFakeClock()
	return env{lim: NewLocal(clk.Now, 1), advance: clk.Advance, check: func(*testing.T) {}}
}

func miniEnv(t *testing.T) env {
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	obs := &countObs{}
	r := NewRedis(c, nil, "sy:", time.Second, NewLocal(clk.Now, 1), obs)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return env{
		lim:     r,
		advance: func(d time.Duration) { clk.Advance(d); m.SetTime(clk.Now()) },
		check: func(t *testing.T) {
			t.Helper()
			if n := obs.fallbacks.Load(); n != 0 {
				t.Fatalf("%d admissions fell back to the local limiter: the scripts did not run", n)
			}
		},
	}
}

// step is one action of a scenario. Unset want fields are not checked.
type step struct {
	advance time.Duration
	op      string // "admit" (default), "release", "reconcile"
	n       int    // admits to make (default 1)
	tokens  int64
	ticket  int     // release/reconcile: index of the admitted ticket
	actual  int64   // reconcile: real tokens
	cost    float64 // reconcile: USD

	allowed    int           // admits expected to pass (-1: don't check)
	kind       string        // kind of the last rejection
	retry      time.Duration // RetryAfter of the last rejection (±1ms)
	remReq     int64         // RemainingRequests of the last decision (-1: don't check)
	remTok     int64
	limitCheck bool // the last decision must report no limits (unlimited team)
}

func admits(n int, tokens int64, allowed int) step {
	return step{n: n, tokens: tokens, allowed: allowed, remReq: -1, remTok: -1}
}

func reject(tokens int64, kind string, retry time.Duration) step {
	return step{n: 1, tokens: tokens, allowed: 0, kind: kind, retry: retry, remReq: -1, remTok: -1}
}

var scenarios = []struct {
	name    string
	team    limitsOf
	slotTTL time.Duration
	steps   []step
}{
	{"rpm: a full minute at once, then limit/60 per second", limitsOf{rpm: 60}, 0, []step{
		admits(60, 0, 60),
		reject(0, KindRPM, time.Second),
		{advance: time.Second, n: 1, allowed: 1, remReq: 0, remTok: -1},
		reject(0, KindRPM, time.Second),
		{advance: 30 * time.Second, n: 31, allowed: 30, kind: KindRPM, retry: time.Second, remReq: -1, remTok: -1},
	}},
	{"rpm 7: exactly 7 in a burst although 60/7 s does not divide", limitsOf{rpm: 7}, 0, []step{
		admits(7, 0, 7),
		reject(0, KindRPM, 60*time.Second/7),
	}},
	{"tpm: estimates are reserved", limitsOf{tpm: 1000}, 0, []step{
		{n: 1, tokens: 400, allowed: 1, remReq: -1, remTok: 600},
		{n: 1, tokens: 400, allowed: 1, remReq: -1, remTok: 200},
		reject(400, KindTPM, 12*time.Second),
	}},
	{"tpm: an estimate above the limit fits a full bucket", limitsOf{tpm: 1000}, 0, []step{
		{n: 1, tokens: 5000, allowed: 1, remReq: -1, remTok: 0},
		reject(1, KindTPM, 60*time.Millisecond),
	}},
	{"tpm: a refund restores capacity", limitsOf{tpm: 1000}, 0, []step{
		admits(1, 1000, 1),
		reject(100, KindTPM, 6*time.Second),
		{op: "reconcile", ticket: 0, actual: 100},
		{n: 1, tokens: 900, allowed: 1, remReq: -1, remTok: 0},
		reject(1, KindTPM, 60*time.Millisecond),
	}},
	{"tpm: a refund larger than the debt fills the bucket, no more", limitsOf{tpm: 1000}, 0, []step{
		admits(1, 1000, 1),
		{advance: 45 * time.Second, n: 0, allowed: -1}, // 750 back, 250 still owed
		{op: "reconcile", ticket: 0, actual: 0},        // refund 1000 > 250 owed
		{n: 1, tokens: 1000, allowed: 1, remReq: -1, remTok: 0},
		reject(1, KindTPM, 60*time.Millisecond),
	}},
	{"tpm: usage above the estimate is charged", limitsOf{tpm: 1000}, 0, []step{
		admits(1, 100, 1),
		{op: "reconcile", ticket: 0, actual: 1100},
		reject(1, KindTPM, 6*time.Second+60*time.Millisecond),
	}},
	{"parallel: release frees the slot, twice is harmless", limitsOf{par: 2}, 0, []step{
		admits(3, 0, 2),
		reject(0, KindParallel, time.Second),
		{op: "release", ticket: 0},
		admits(1, 0, 1),
		{op: "release", ticket: 0},
		reject(0, KindParallel, time.Second),
	}},
	{"parallel: a leaked slot expires after its TTL", limitsOf{par: 1}, time.Minute, []step{
		admits(1, 0, 1),
		reject(0, KindParallel, time.Second),
		{advance: 61 * time.Second, n: 1, allowed: 1, remReq: -1, remTok: -1},
	}},
	{"budget: spent until the period ends", limitsOf{usd: 1, period: time.Hour}, 0, []step{
		admits(1, 0, 1),
		{op: "reconcile", ticket: 0, actual: 10, cost: 0.6},
		admits(1, 0, 1),
		{op: "reconcile", ticket: 1, actual: 10, cost: 0.6},
		reject(0, KindBudget, 2800*time.Second), // the hour containing the fake clock's start ends in 2800 s
		{advance: 2800 * time.Second, n: 1, allowed: 1, remReq: -1, remTok: -1},
	}},
	{"the binding dimension is the longest wait", limitsOf{rpm: 1, usd: 1, period: time.Hour}, 0, []step{
		admits(1, 0, 1),
		{op: "reconcile", ticket: 0, cost: 2},
		reject(0, KindBudget, 2800*time.Second),
	}},
	{"a rejection charges nothing", limitsOf{rpm: 2, tpm: 100}, 0, []step{
		{n: 1, tokens: 100, allowed: 1, remReq: 1, remTok: 0},
		reject(100, KindTPM, time.Minute),
		{n: 1, tokens: 0, allowed: 1, remReq: 0, remTok: -1},
	}},
	{"a team without limits", limitsOf{}, 0, []step{
		{n: 100, tokens: 1 << 40, allowed: 100, remReq: -1, remTok: -1, limitCheck: true},
	}},
}

// TestScenarios runs every scenario on the local limiter and on the Redis
// scripts, which must agree step by step.
func TestScenarios(t *testing.T) {
	for _, impl := range []struct {
		name string
		env  func(*testing.T) env
	}{{"local", localEnv}, {"redis", miniEnv}} {
		for _, sc := range scenarios {
			t.Run(impl.name+"/"+sc.name, func(t *testing.T) {
				e := impl.env(t)
				if sc.slotTTL > 0 {
					e.lim.(interface{ SetSlotTTL(time.Duration) }).SetSlotTTL(sc.slotTTL)
				}
				team := newTeam("t", sc.team)
				var tickets []Ticket
				for i, st := range sc.steps {
					e.advance(st.advance)
					switch st.op {
					case "release":
						e.lim.Release(tickets[st.ticket])
						settle(t, e.lim)
						continue
					case "reconcile":
						e.lim.Reconcile(tickets[st.ticket], st.actual, st.cost)
						settle(t, e.lim)
						continue
					}
					allowed := 0
					var last Decision
					for j := range st.n {
						d, err := e.lim.Admit(context.Background(), Admission{RequestID: reqID(j), Team: team, Tokens: st.tokens})
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						if d.Allowed {
							allowed++
							tickets = append(tickets, d.Ticket)
							if d.Ticket.IsZero() {
								t.Fatalf("step %d: allowed with a zero ticket", i)
							}
						}
						last = d
					}
					if st.allowed >= 0 && allowed != st.allowed {
						t.Fatalf("step %d: %d of %d allowed, want %d (last %+v)", i, allowed, st.n, st.allowed, last)
					}
					if st.kind != "" {
						if last.Allowed || last.Kind != st.kind {
							t.Fatalf("step %d: last decision %+v, want rejected %q", i, last, st.kind)
						}
						if diff := last.RetryAfter - st.retry; diff < -time.Millisecond || diff > time.Millisecond {
							t.Fatalf("step %d: RetryAfter %v, want %v", i, last.RetryAfter, st.retry)
						}
					}
					if st.remReq >= 0 && last.RemainingRequests != st.remReq {
						t.Fatalf("step %d: RemainingRequests %d, want %d", i, last.RemainingRequests, st.remReq)
					}
					if st.remTok >= 0 && last.RemainingTokens != st.remTok {
						t.Fatalf("step %d: RemainingTokens %d, want %d", i, last.RemainingTokens, st.remTok)
					}
					if st.limitCheck && (last.LimitRequests != 0 || last.LimitTokens != 0) {
						t.Fatalf("step %d: unlimited team reported limits %+v", i, last)
					}
				}
				e.check(t)
			})
		}
	}
}

// TestHeaders checks the x-ratelimit-* values after a few admissions, on
// both implementations.
func TestHeaders(t *testing.T) {
	for _, mk := range []func(*testing.T) env{localEnv, miniEnv} {
		e := mk(t)
		team := newTeam("h", limitsOf{rpm: 60, tpm: 6000})
		var d Decision
		for range 3 {
			d, _ = e.lim.Admit(context.Background(), Admission{RequestID: "r", Team: team, Tokens: 1000})
		}
		if !d.Allowed || d.LimitRequests != 60 || d.RemainingRequests != 57 || d.LimitTokens != 6000 || d.RemainingTokens != 3000 {
			t.Fatalf("headers %+v", d)
		}
		// Full again after 3 requests' worth (3 s) and 3000 tokens' worth (30 s).
		if abs(d.ResetRequests-3*time.Second) > time.Millisecond || abs(d.ResetTokens-30*time.Second) > time.Millisecond {
			t.Fatalf("resets %v %v, want 3s 30s", d.ResetRequests, d.ResetTokens)
		}
		e.advance(10 * time.Second)
		d, _ = e.lim.Admit(context.Background(), Admission{RequestID: "r", Team: team, Tokens: 0})
		if d.RemainingRequests != 59 || d.RemainingTokens != 4000 {
			t.Fatalf("after 10 s: %+v", d)
		}
		e.check(t)
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestLocalDivisor: the fallback enforces limit/expected_replicas.
func TestLocalDivisor(t *testing.T) {
	clk := newFakeClock()
	l := NewLocal(clk.Now, 3)
	team := newTeam("d", limitsOf{rpm: 60, par: 2, tpm: 3000})
	n := 0
	for i := range 100 {
		if d, _ := l.Admit(context.Background(), Admission{RequestID: reqID(i), Team: team}); d.Allowed {
			n++
			l.Release(d.Ticket)
		}
	}
	if n != 20 {
		t.Fatalf("rpm 60 over 3 replicas: %d admitted, want 20", n)
	}
	// max_parallel 2 over 3 replicas still allows one.
	d, _ := l.Admit(context.Background(), Admission{RequestID: "x", Team: newTeam("p", limitsOf{par: 2})})
	d2, _ := l.Admit(context.Background(), Admission{RequestID: "y", Team: newTeam("p", limitsOf{par: 2})})
	if !d.Allowed || d2.Allowed {
		t.Fatalf("par 2 / 3 replicas: %v %v, want one slot", d.Allowed, d2.Allowed)
	}
}

// TestReleaseEveryPath is the max_parallel contract from the caller's side:
// whichever way a request ends (success, upstream failure, client gone, a
// panic recovered by the server), the deferred Release frees its slot
// exactly once, and a zero ticket (rejected request) is a no-op.
func TestReleaseEveryPath(t *testing.T) {
	for _, mk := range []func(*testing.T) env{localEnv, miniEnv} {
		e := mk(t)
		team := newTeam("p", limitsOf{par: 1})
		serve := func(end string) (err error) {
			d, _ := e.lim.Admit(context.Background(), Admission{RequestID: end, Team: team})
			if !d.Allowed {
				t.Fatalf("%s: slot still held by an earlier request", end)
			}
			defer func() {
				if r := recover(); r != nil {
					err = context.Canceled
				}
			}()
			defer e.lim.Release(d.Ticket)
			switch end {
			case "upstream-failure", "client-gone":
				return context.Canceled
			case "panic":
				panic("handler panic")
			}
			return nil
		}
		for _, end := range []string{"success", "upstream-failure", "client-gone", "panic", "success"} {
			_ = serve(end)
			settle(t, e.lim)
		}
		e.lim.Release(Ticket{}) // rejected request: nothing to free
		d, _ := e.lim.Admit(context.Background(), Admission{RequestID: "last", Team: team})
		if !d.Allowed {
			t.Fatal("slot leaked")
		}
		e.check(t)
	}
}
