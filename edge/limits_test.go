package edge

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/teamtest"
	"switchyard/ratelimit"
)

// env is an edge state under test with its clock: the local state on a fake
// clock, or the Redis state on miniredis whose TIME follows the same fake
// clock (SetTime: FastForward moves TTLs but not TIME). settle runs the
// writer once, synchronously (no goroutine, no sleep).
type env struct {
	st      State
	advance func(time.Duration)
	settle  func(t *testing.T)
	check   func(t *testing.T)
}

func localEnv(t *testing.T) env {
	clk := newFakeClock()
	return env{st: NewLocal(clk.Now, nil), advance: clk.Advance, settle: func(*testing.T) {}, check: func(*testing.T) {}}
}

func miniEnv(t *testing.T) env { return miniEnvOf(t, false) }

// generalEnv is miniEnv with every admission through beginLua: with
// miniEnv, teams with RPM and TPM only go through gcraLua.
func generalEnv(t *testing.T) env { return miniEnvOf(t, true) }

func miniEnvOf(t *testing.T, general bool) env {
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	obs := &countObs{}
	r := newRedis(c, nil, Config{Prefix: "sy:", Timeout: time.Second, Clock: clk.Now}, nil, nil, nil, obs)
	r.general = general
	return env{
		st:      r,
		advance: func(d time.Duration) { clk.Advance(d); m.SetTime(clk.Now()) },
		settle: func(t *testing.T) {
			t.Helper()
			if !r.w.step(context.Background(), clk.Now()) {
				t.Fatal("writer step failed")
			}
		},
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

	user  string // the end user of the admits ("" = none)
	level string // the level of the last rejection (SPEC 3.1; "" = not checked)
}

func admits(n int, tokens int64, allowed int) step {
	return step{n: n, tokens: tokens, allowed: allowed, remReq: -1, remTok: -1}
}

func reject(tokens int64, kind string, retry time.Duration) step {
	return step{n: 1, tokens: tokens, allowed: 0, kind: kind, retry: retry, remReq: -1, remTok: -1}
}

// as sets a step's end user and the level its last rejection must name.
func (s step) as(user, level string) step { s.user, s.level = user, level; return s }

var scenarios = []struct {
	name      string
	team      teamtest.Limits
	steps     []step
	key, user teamtest.Limits // the key's limits and the team's user_limits (SPEC 3.1)
}{
	{"rpm: a full minute at once, then limit/60 per second", teamtest.Limits{RPM: 60}, []step{
		admits(60, 0, 60),
		reject(0, ratelimit.KindRPM, time.Second),
		{advance: time.Second, n: 1, allowed: 1, remReq: 0, remTok: -1},
		reject(0, ratelimit.KindRPM, time.Second),
		{advance: 30 * time.Second, n: 31, allowed: 30, kind: ratelimit.KindRPM, retry: time.Second, remReq: -1, remTok: -1},
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"rpm 7: exactly 7 in a burst although 60/7 s does not divide", teamtest.Limits{RPM: 7}, []step{
		admits(7, 0, 7),
		reject(0, ratelimit.KindRPM, 60*time.Second/7),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"tpm: estimates are reserved", teamtest.Limits{TPM: 1000}, []step{
		{n: 1, tokens: 400, allowed: 1, remReq: -1, remTok: 600},
		{n: 1, tokens: 400, allowed: 1, remReq: -1, remTok: 200},
		reject(400, ratelimit.KindTPM, 12*time.Second),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"tpm: an estimate above the limit fits a full bucket", teamtest.Limits{TPM: 1000}, []step{
		{n: 1, tokens: 5000, allowed: 1, remReq: -1, remTok: 0},
		reject(1, ratelimit.KindTPM, 60*time.Millisecond),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"tpm: a refund restores capacity", teamtest.Limits{TPM: 1000}, []step{
		admits(1, 1000, 1),
		reject(100, ratelimit.KindTPM, 6*time.Second),
		{op: "reconcile", ticket: 0, actual: 100},
		{n: 1, tokens: 900, allowed: 1, remReq: -1, remTok: 0},
		reject(1, ratelimit.KindTPM, 60*time.Millisecond),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"tpm: a refund larger than the debt fills the bucket, no more", teamtest.Limits{TPM: 1000}, []step{
		admits(1, 1000, 1),
		{advance: 45 * time.Second, n: 0, allowed: -1}, // 750 back, 250 still owed
		{op: "reconcile", ticket: 0, actual: 0},        // refund 1000 > 250 owed
		{n: 1, tokens: 1000, allowed: 1, remReq: -1, remTok: 0},
		reject(1, ratelimit.KindTPM, 60*time.Millisecond),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"tpm: usage above the estimate is charged", teamtest.Limits{TPM: 1000}, []step{
		admits(1, 100, 1),
		{op: "reconcile", ticket: 0, actual: 1100},
		reject(1, ratelimit.KindTPM, 6*time.Second+60*time.Millisecond),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"parallel: release frees the slot, twice is harmless", teamtest.Limits{Par: 2}, []step{
		admits(3, 0, 2),
		reject(0, ratelimit.KindParallel, time.Second),
		{op: "release", ticket: 0},
		admits(1, 0, 1),
		{op: "release", ticket: 0},
		reject(0, ratelimit.KindParallel, time.Second),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"budget: spent until the period ends", teamtest.Limits{USD: 1, Period: time.Hour}, []step{
		admits(1, 0, 1),
		{op: "reconcile", ticket: 0, actual: 10, cost: 0.6},
		admits(1, 0, 1),
		{op: "reconcile", ticket: 1, actual: 10, cost: 0.6},
		reject(0, ratelimit.KindBudget, time.Hour), // the hour opened with the first spend, now
		{advance: time.Hour, n: 1, allowed: 1, remReq: -1, remTok: -1},
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"the binding dimension is the longest wait", teamtest.Limits{RPM: 1, USD: 1, Period: time.Hour}, []step{
		admits(1, 0, 1),
		{op: "reconcile", ticket: 0, cost: 2},
		reject(0, ratelimit.KindBudget, time.Hour),
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"a rejection charges nothing", teamtest.Limits{RPM: 2, TPM: 100}, []step{
		{n: 1, tokens: 100, allowed: 1, remReq: 1, remTok: 0},
		reject(100, ratelimit.KindTPM, time.Minute),
		{n: 1, tokens: 0, allowed: 1, remReq: 0, remTok: -1},
	}, teamtest.Limits{}, teamtest.Limits{}},
	{"a team without limits", teamtest.Limits{}, []step{
		{n: 100, tokens: 1 << 40, allowed: 100, remReq: -1, remTok: -1, limitCheck: true},
	}, teamtest.Limits{}, teamtest.Limits{}},

	// SPEC 3.1: every level at once, all or nothing
	{"levels: a key's rpm binds under a looser team", teamtest.Limits{RPM: 100}, []step{
		{n: 5, allowed: 3, kind: ratelimit.KindRPM, retry: 20 * time.Second, remReq: 0, remTok: -1, level: "key"},
		{advance: 20 * time.Second, n: 1, allowed: 1, remReq: 0, remTok: -1},
	}, teamtest.Limits{RPM: 3}, teamtest.Limits{}},
	{"levels: a key without a team limit", teamtest.Limits{}, []step{
		admits(2, 0, 2),
		reject(0, ratelimit.KindRPM, 30*time.Second).as("", "key"),
	}, teamtest.Limits{RPM: 2}, teamtest.Limits{}},
	{"levels: each end user has the user limits", teamtest.Limits{RPM: 10}, []step{
		{n: 3, allowed: 2, kind: ratelimit.KindRPM, retry: 30 * time.Second, remReq: 0, remTok: -1, user: "ann", level: "user"},
		{n: 3, allowed: 2, kind: ratelimit.KindRPM, retry: 30 * time.Second, remReq: 0, remTok: -1, user: "bob", level: "user"},
		{n: 1, allowed: 1, remReq: 5, remTok: -1}, // no user: the team's 10, 4 spent + this one
	}, teamtest.Limits{}, teamtest.Limits{RPM: 2}},
	{"levels: a level that refuses charges no other", teamtest.Limits{TPM: 1000}, []step{
		{n: 1, tokens: 400, allowed: 1, remReq: -1, remTok: 0, user: "ann"},                            // team 600, key 200, ann 0
		reject(100, ratelimit.KindTPM, 15*time.Second).as("ann", "user"),                               // ann is full: nothing charged
		{n: 1, tokens: 200, allowed: 1, remReq: -1, remTok: 0, user: "bob"},                            // key's last 200: it was not charged for ann
		reject(1, ratelimit.KindTPM, 100*time.Millisecond).as("cid", "key"),                            // cid is fresh, the key is full (600/min: 100 ms a token)
		{advance: 10 * time.Second, n: 1, tokens: 100, allowed: 1, remReq: -1, remTok: 0, user: "cid"}, // 100 back at the key
	}, teamtest.Limits{TPM: 600}, teamtest.Limits{TPM: 400}},
	{"levels: a key's slot is released at every level", teamtest.Limits{Par: 5}, []step{
		admits(2, 0, 1),
		reject(0, ratelimit.KindParallel, time.Second).as("", "key"),
		{op: "release", ticket: 0},
		admits(1, 0, 1),
	}, teamtest.Limits{Par: 1}, teamtest.Limits{}},
	{"levels: a user's budget", teamtest.Limits{USD: 100, Period: time.Hour}, []step{
		admits(1, 0, 1).as("ann", ""),
		{op: "reconcile", ticket: 0, actual: 10, cost: 0.6},
		admits(1, 0, 1).as("ann", ""),
		{op: "reconcile", ticket: 1, actual: 10, cost: 0.6},
		reject(0, ratelimit.KindBudget, time.Hour).as("ann", "user"),
		admits(1, 0, 1).as("bob", ""),
	}, teamtest.Limits{}, teamtest.Limits{USD: 1, Period: time.Hour}},
}

// TestScenarios runs every scenario on the local state and on the Redis
// scripts, which must agree step by step (one table, every
// implementation): "redis" sends a team with RPM and TPM only through
// gcraLua, "redis-general" everything through beginLua.
func TestScenarios(t *testing.T) {
	for _, impl := range []struct {
		name string
		env  func(*testing.T) env
	}{{"local", localEnv}, {"redis", miniEnv}, {"redis-general", generalEnv}} {
		for _, sc := range scenarios {
			t.Run(impl.name+"/"+sc.name, func(t *testing.T) {
				e := impl.env(t)
				team := teamtest.Team("t", sc.team)
				key := Level{Kind: LevelKey, ID: "key_1", Name: "ci", Limits: teamtest.Level(sc.key)}
				userLimits := teamtest.Level(sc.user)
				var begun []*Begun
				for i, st := range sc.steps {
					e.advance(st.advance)
					switch st.op {
					case "release":
						b := begun[st.ticket]
						e.st.Finish(b, &Outcome{Served: true, PromptTokens: int(b.tokens)})
						e.settle(t)
						continue
					case "reconcile":
						e.st.Finish(begun[st.ticket], &Outcome{Served: true, PromptTokens: int(st.actual), CostUSD: st.cost})
						e.settle(t)
						continue
					}
					allowed := 0
					var last ratelimit.Decision
					for j := range st.n {
						q := &Request{RequestID: reqID(j), Team: team, Tokens: st.tokens, Key: key}
						if st.user != "" {
							q.User = Level{Kind: LevelUser, ID: st.user, Name: st.user, Limits: userLimits}
						}
						b, err := e.st.Begin(context.Background(), q)
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						if b.Decision.Allowed {
							allowed++
							begun = append(begun, &b)
						}
						last = b.Decision
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
						if st.level != "" && LevelKind(last.Level).String() != st.level {
							t.Fatalf("step %d: rejected at level %s, want %s", i, LevelKind(last.Level), st.level)
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
	for _, mk := range []func(*testing.T) env{localEnv, miniEnv, generalEnv} {
		e := mk(t)
		team := teamtest.Team("h", teamtest.Limits{RPM: 60, TPM: 6000})
		var d ratelimit.Decision
		for range 3 {
			d = begin(t, e.st, team, 1000).Decision
		}
		if !d.Allowed || d.LimitRequests != 60 || d.RemainingRequests != 57 || d.LimitTokens != 6000 || d.RemainingTokens != 3000 {
			t.Fatalf("headers %+v", d)
		}
		// Full again after 3 requests' worth (3 s) and 3000 tokens' worth (30 s).
		if abs(d.ResetRequests-3*time.Second) > time.Millisecond || abs(d.ResetTokens-30*time.Second) > time.Millisecond {
			t.Fatalf("resets %v %v, want 3s 30s", d.ResetRequests, d.ResetTokens)
		}
		e.advance(10 * time.Second)
		d = begin(t, e.st, team, 0).Decision
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
