package edge

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/fakeclock"
	"switchyard/internal/teamtest"
	"switchyard/telemetry"
)

// miniRig is a Redis edge state on miniredis and a fake clock that drives
// both, with a switchable health (the breaker) and the writer stepped by hand.
type miniRig struct {
	m   *miniredis.Miniredis
	clk *fakeclock.Clock
	c   *redis.Client
	r   *Redis
	obs *countObs
	up  *health
}

type health struct{ down atomic.Bool }

func (h *health) Up() bool { return !h.down.Load() }

func newMiniRig(t *testing.T, cfg Config, audit bool) *miniRig {
	t.Helper()
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	cfg.Prefix, cfg.Clock = "sy:", clk.Now
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	rig := &miniRig{m: m, clk: clk, c: c, obs: &countObs{}, up: &health{}}
	var store *telemetry.RedisAudit
	ring := telemetry.NewRing(100)
	if audit {
		store = telemetry.NewRedisAudit(c, "sy:", 1000, ring)
	}
	rig.r = newRedis(c, rig.up, cfg, ring, store, nil, rig.obs)
	return rig
}

func (g *miniRig) advance(d time.Duration) { g.clk.Advance(d); g.m.SetTime(g.clk.Now()) }

func (g *miniRig) step(t *testing.T) bool {
	t.Helper()
	return g.r.w.step(context.Background(), g.clk.Now())
}

// TestSequentialMaxParallelOneNeverRefused: at max_parallel 1, a client that
// sends its next request as soon as the previous one ended is admitted every
// time, although the writer has not run in between: the release travels in
// the next admission script (SPEC 3). This failed with the old lingering
// flusher.
func TestSequentialMaxParallelOneNeverRefused(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("seq", teamtest.Limits{Par: 1})
	for i := range 50 {
		b := begin(t, g.r, team, 0)
		if !b.Decision.Allowed {
			t.Fatalf("request %d refused: %+v", i, b.Decision)
		}
		g.r.Finish(&b, &Outcome{Served: i%3 != 0})
	}
	if n := g.m.Exists("sy:{team:seq}:par"); n && len(mustZ(t, g.m, "sy:{team:seq}:par")) != 1 {
		t.Fatal("more than one slot held")
	}
}

func mustZ(t *testing.T, m *miniredis.Miniredis, k string) []string {
	t.Helper()
	v, err := m.ZMembers(k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSlotLease: a slot whose node stops renewing it (the node died) comes
// back within one lease; a slot whose node is alive is renewed by the writer
// and stays held however long the request runs.
func TestSlotLease(t *testing.T) {
	lease := 30 * time.Second
	dead := newMiniRig(t, Config{SlotLease: lease}, false)
	team := teamtest.Team("lease", teamtest.Limits{Par: 1})
	if b := begin(t, dead.r, team, 0); !b.Decision.Allowed {
		t.Fatal("first admission refused")
	}
	// another node on the same Redis
	other := newRedis(dead.c, nil, Config{Prefix: "sy:", Timeout: time.Second, SlotLease: lease, Clock: dead.clk.Now}, nil, nil, nil, nil)
	if b := begin(t, other, team, 0); b.Decision.Allowed {
		t.Fatal("slot of a live request taken")
	}
	dead.advance(lease + time.Millisecond) // the first node never renews: it died
	if b := begin(t, other, team, 0); !b.Decision.Allowed {
		t.Fatalf("slot of a dead node still held after one lease: %+v", b.Decision)
	}

	alive := newMiniRig(t, Config{SlotLease: lease}, false)
	held := begin(t, alive.r, team, 0)
	if !held.Decision.Allowed {
		t.Fatal("admission refused")
	}
	for range 12 { // four leases, renewing every third of one
		alive.advance(lease / 3)
		if !alive.step(t) {
			t.Fatal("writer step failed")
		}
	}
	if b := begin(t, alive.r, team, 0); b.Decision.Allowed {
		t.Fatal("a renewed slot expired while its request ran")
	}
	alive.r.Finish(&held, &Outcome{})
	if b := begin(t, alive.r, team, 0); !b.Decision.Allowed {
		t.Fatal("released slot not free")
	}
}

// TestSlotSetTTL: an admission sets the slot set's TTL to two leases only
// when less than one is left, so the set always outlives the slots in it
// and a busy team does not pay a PEXPIRE per admission. Before, every
// admission set it (the second case below saw 60 s again).
func TestSlotSetTTL(t *testing.T) {
	lease := 30 * time.Second
	g := newMiniRig(t, Config{SlotLease: lease}, false)
	team := teamtest.Team("ttl", teamtest.Limits{Par: 100})
	const key = "sy:{team:ttl}:par"
	for _, c := range []struct {
		name   string
		preset time.Duration // the set's TTL before the admission (0: none)
		want   time.Duration
	}{
		{"a new set: two leases", 0, 2 * lease},
		{"more than a lease left: kept", 31 * time.Second, 31 * time.Second},
		{"less than a lease left: two leases", 29 * time.Second, 2 * lease},
	} {
		if c.preset > 0 {
			g.m.SetTTL(key, c.preset)
		}
		if b := begin(t, g.r, team, 0); !b.Decision.Allowed {
			t.Fatalf("%s: admission refused", c.name)
		}
		if got := g.m.TTL(key); got != c.want {
			t.Fatalf("%s: TTL %v, want %v", c.name, got, c.want)
		}
	}
}

// TestEveryExitReconciles: an admitted request that is not served refunds
// its whole reservation; a served one is charged what Charge says.
func TestEveryExitReconciles(t *testing.T) {
	for _, mk := range []func(*testing.T) env{localEnv, miniEnv} {
		e := mk(t)
		team := teamtest.Team("r", teamtest.Limits{TPM: 1000})
		b := begin(t, e.st, team, 1000)
		if !b.Decision.Allowed {
			t.Fatal("refused")
		}
		if d := begin(t, e.st, team, 100).Decision; d.Allowed {
			t.Fatal("bucket should be full")
		}
		e.st.Finish(&b, &Outcome{Served: false}) // 404, 403, every attempt failed, client gone
		e.settle(t)
		if d := begin(t, e.st, team, 0).Decision; d.RemainingTokens != 1000 {
			t.Fatalf("not served: %d tokens left, want the whole 1000 back", d.RemainingTokens)
		}
		b = begin(t, e.st, team, 1000)
		p, c := Charge(10, 0, 0, 400, 0) // no usage reported: prompt estimate + content characters/4
		if p != 10 || c != 100 {
			t.Fatalf("Charge = %d, %d", p, c)
		}
		e.st.Finish(&b, &Outcome{Served: true, PromptTokens: p, CompletionTokens: c})
		e.settle(t)
		if d := begin(t, e.st, team, 0).Decision; d.RemainingTokens != 890 {
			t.Fatalf("served without usage: %d left, want 1000-110", d.RemainingTokens)
		}
		e.check(t)
	}
}

// TestLateRefundBounded: a refund that arrives after its reservation has
// decayed returns nothing (the old code moved the TAT back by the whole
// refund and handed out capacity that had already come back).
func TestLateRefundBounded(t *testing.T) {
	for _, mk := range []func(*testing.T) env{localEnv, miniEnv} {
		e := mk(t)
		team := teamtest.Team("late", teamtest.Limits{TPM: 1000})
		first := begin(t, e.st, team, 500)
		second := begin(t, e.st, team, 500)
		if !first.Decision.Allowed || !second.Decision.Allowed {
			t.Fatal("refused")
		}
		e.advance(40 * time.Second) // first ended at +30s: decayed; second holds 20s (333 tokens)
		e.st.Finish(&first, &Outcome{Served: false})
		e.settle(t)
		if d := begin(t, e.st, team, 0).Decision; d.RemainingTokens != 666 {
			t.Fatalf("after a late refund %d tokens left, want 666 (nothing returned)", d.RemainingTokens)
		}
		e.st.Finish(&second, &Outcome{Served: false}) // still holds 20s: returned
		e.settle(t)
		if d := begin(t, e.st, team, 0).Decision; d.RemainingTokens != 1000 {
			t.Fatalf("after a timely refund %d tokens left, want 1000", d.RemainingTokens)
		}
		e.check(t)
	}
}

// TestUsageExactThroughOutage: usage, spend and refunds are aggregated per
// team (and deployment) while Redis is down, however many requests, and
// written exactly once when it is back.
func TestUsageExactThroughOutage(t *testing.T) {
	for _, one := range []bool{false, true} {
		t.Run(fmt.Sprintf("one-shard=%v", one), func(t *testing.T) { usageExactThroughOutage(t, one) })
	}
}

func usageExactThroughOutage(t *testing.T, oneShard bool) {
	g := newMiniRig(t, Config{OneShard: oneShard}, false)
	team := teamtest.Team("u", teamtest.Limits{RPM: 1_000_000, USD: 1000, Period: time.Hour})
	g.m.Close()
	const n = 5000
	for i := range n {
		b := begin(t, g.r, team, 10) // falls back: Redis is gone
		g.r.Finish(&b, &Outcome{Served: true, Deployment: "d" + strconv.Itoa(i%2), PromptTokens: 7, CompletionTokens: 3, CostUSD: 0.001})
		if i%1000 == 0 {
			g.advance(time.Second)
			g.step(t) // fails, keeps everything
		}
	}
	if err := g.m.Restart(); err != nil {
		t.Fatal(err)
	}
	ok := false
	for i := 0; i < 3 && !ok; i++ { // the first call may meet a pooled connection of the old server
		g.advance(2 * time.Second)
		ok = g.step(t)
	}
	if !ok {
		t.Fatal("writer step failed after Redis came back")
	}
	for i := 0; i < 3 && !g.r.w.empty(); i++ { // the batch in flight first, then what piled up behind it
		g.advance(defaultUsageEvery) // and the usage rows once they have waited (writer.dueUsage)
		g.step(t)
	}
	for _, d := range []string{"d0", "d1"} {
		if got := g.m.HGet("sy:{team:u}:usage", d+"|req"); got != strconv.Itoa(n/2) {
			t.Fatalf("%s requests in Redis = %s, want %d", d, got, n/2)
		}
		if got := g.m.HGet("sy:{team:u}:usage", d+"|tok"); got != strconv.Itoa(n/2*10) {
			t.Fatalf("%s tokens in Redis = %s, want %d", d, got, n/2*10)
		}
	}
	usd, _ := strconv.ParseFloat(g.m.HGet("sy:{team:u}:budget", "usd"), 64)
	if usd < 4.999 || usd > 5.001 {
		t.Fatalf("spend in Redis %v, want 5", usd)
	}
	// a resend of an applied batch is a no-op: nothing pending, nothing doubled
	if !g.step(t) || g.m.HGet("sy:{team:u}:usage", "d0|req") != strconv.Itoa(n/2) {
		t.Fatal("usage doubled")
	}
}

// TestNeverBoth: a node that falls back mid-burst does not admit locally
// what Redis already admitted (SPEC 9).
func TestNeverBoth(t *testing.T) {
	g := newMiniRig(t, Config{Divisor: 1}, false)
	team := teamtest.Team("nb", teamtest.Limits{RPM: 20})
	for i := range 20 {
		if !begin(t, g.r, team, 0).Decision.Allowed {
			t.Fatalf("shared admission %d refused", i)
		}
	}
	g.up.down.Store(true) // the breaker opens
	if d := begin(t, g.r, team, 0).Decision; d.Allowed {
		t.Fatal("the local fallback admitted on top of the shared quota")
	}
	if g.obs.fallbacks.Load() == 0 {
		t.Fatal("fallback not counted")
	}
}

// TestAuditBoundedAndScoped: entries beyond the writer's bound are dropped
// from the stream and counted (Finish never blocks); a reused request id
// lists every entry, of every team.
func TestAuditBoundedAndScoped(t *testing.T) {
	g := newMiniRig(t, Config{MaxAudit: 10}, true)
	team := teamtest.Team("a", teamtest.Limits{})
	other := teamtest.Team("b", teamtest.Limits{})
	for i := range 25 {
		tm := team
		if i%2 == 1 {
			tm = other
		}
		b := begin(t, g.r, tm, 0)
		g.r.Finish(&b, &Outcome{Audit: &telemetry.Entry{RequestID: "same", Team: tm.Name, Status: 200 + i}})
	}
	if got := g.obs.audit.Load(); got != 15 {
		t.Fatalf("%d audit entries dropped, want 15 beyond the bound of 10", got)
	}
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	es, err := g.r.w.store.Lookup(context.Background(), "same")
	if err != nil || len(es) != 10 {
		t.Fatalf("lookup of a reused id: %d entries, %v; want all 10 written", len(es), err)
	}
	teams := map[string]int{}
	for _, e := range es {
		teams[e.Team]++
	}
	if teams["a"] == 0 || teams["b"] == 0 {
		t.Fatalf("entries of both teams expected: %v", teams)
	}
	if es[0].Status < es[len(es)-1].Status {
		t.Fatal("not newest first")
	}
	mine, _ := g.r.w.store.Recent(context.Background(), telemetry.Filter{Team: "a", RequestID: "same"})
	for _, e := range mine {
		if e.Team != "a" {
			t.Fatal("team filter leaked another team's entry")
		}
	}
}

// TestPinsOneRoundTripAndOwnWrites: a team without limits reads only the
// pins it needs (no command at all without any); this node's pin writes are
// read back before they reach Redis.
func TestPinsOneRoundTripAndOwnWrites(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("p", teamtest.Limits{})
	before := g.m.CommandCount()
	if b := begin(t, g.r, team, 0); !b.Decision.Allowed {
		t.Fatal("refused")
	}
	if g.m.CommandCount() != before {
		t.Fatal("a team without limits and pins cost a Redis command")
	}
	q := &Request{RequestID: "x", Team: team, Pins: PinQuery{Session: "p:id:1", TierAlias: "normal", Models: [2]string{"easy", "hard"}}}
	b, _ := g.r.Begin(context.Background(), q)
	g.r.Finish(&b, &Outcome{TierPin: "hard", TierTTL: time.Minute, DepModel: "hard", DepPin: "h1", DepTTL: time.Minute})
	b2, _ := g.r.Begin(context.Background(), q)
	if b2.Pins.Tier != "hard" || b2.Deployment("hard") != "h1" {
		t.Fatalf("own pins not read back before the flush: %+v", b2.Pins)
	}
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	if v, _ := g.m.Get("sy:{team:p}:pt:p:id:1|normal"); v != "hard" {
		t.Fatalf("tier pin in Redis = %q", v)
	}
	// another node reads it from Redis in its one round trip
	other := newRedis(g.c, nil, Config{Prefix: "sy:", Timeout: time.Second, Clock: g.clk.Now}, nil, nil, nil, nil)
	b3, _ := other.Begin(context.Background(), q)
	if b3.Pins.Tier != "hard" || b3.Deployment("hard") != "h1" || b3.Deployment("easy") != "" {
		t.Fatalf("shared pins: %+v", b3.Pins)
	}
}

// TestBusySessionPinRenewedPerNinthTTL: a session whose requests keep its
// deployment pin writes it to Redis once, then renews it once per ninth of
// the TTL it is set with instead of on every request, and every pin lives
// at least the session TTL after the last request (SPEC 8; renewed per
// quarter of the session TTL, a pin was left to expire 15 minutes early);
// a pin Redis lost (a restart) is written again at the next request.
func TestBusySessionPinRenewedPerNinthTTL(t *testing.T) {
	rig := newMiniRig(t, Config{}, false)
	ctx := context.Background()
	team := teamtest.Team("a", teamtest.Limits{})
	const ttl = time.Hour
	const life = ttl + ttl/8 // pinLife
	key := "sy:{team:a}:" + depPinKey("s1", "m")
	serve := func() {
		t.Helper()
		b, err := rig.r.Begin(ctx, &Request{RequestID: "r", Team: team, Pins: PinQuery{Session: "s1", Models: [2]string{"m"}}})
		if err != nil || b.Local {
			t.Fatalf("begin: %v local=%v", err, b.Local)
		}
		rig.r.Finish(&b, &Outcome{Served: true, Deployment: "d1", DepModel: "m", DepPin: "d1", DepTTL: ttl})
		if !rig.step(t) {
			t.Fatal("the writer round failed")
		}
		if got := rig.m.TTL(key); got < ttl {
			t.Fatalf("the pin expires %v after the request, before the session TTL of %v", got, ttl)
		}
	}
	wait := func(d time.Duration) { rig.advance(d); rig.m.FastForward(d) }
	serve()
	if v, _ := rig.m.Get(key); v != "d1" || rig.m.TTL(key) != life {
		t.Fatalf("first request: pin %q ttl %v, want d1 and %v (keys %v)", v, rig.m.TTL(key), life, rig.m.Keys())
	}
	wait(5 * time.Minute)
	serve()
	if got := rig.m.TTL(key); got != life-5*time.Minute {
		t.Fatalf("a request 5 minutes later rewrote the pin: ttl %v, want %v left", got, life-5*time.Minute)
	}
	wait(3 * time.Minute)
	serve()
	if got := rig.m.TTL(key); got != life {
		t.Fatalf("a request past a ninth of the TTL did not renew the pin: ttl %v", got)
	}
	for range 20 { // a request every 7 minutes: renewed as needed, never short
		wait(7 * time.Minute)
		serve()
	}
	rig.m.Del(key)
	wait(time.Minute)
	serve()
	if v, _ := rig.m.Get(key); v != "d1" {
		t.Fatalf("a pin Redis lost was not written again: %q", v)
	}
}

// TestForgetTeamsKeepsBusyRecords: ForgetTeams drops the records of the
// teams it names, with their state in the local fallback, and only once
// nothing of theirs is left for the writer: a team's usage goes out before
// its record is dropped, and a record with a live slot is kept. The wait
// for no request of a deleted team to be running (the grace) and a team
// created again within it are the gateway sweep's: TestGoneTeamsSweep.
// Before, every record stayed until restart: team churn through the admin
// API grew the node's memory (SPEC 16: it grows with the bounded stores
// only).
func TestForgetTeamsKeepsBusyRecords(t *testing.T) {
	g := newMiniRig(t, Config{SlotLease: 30 * time.Second}, false)
	lim := teamtest.Limits{RPM: 100, TPM: 100000}
	for _, name := range []string{"a", "b"} {
		b, err := g.r.Begin(context.Background(), &Request{RequestID: "r", Team: teamtest.Team(name, lim), Tokens: 10})
		if err != nil || !b.Decision.Allowed {
			t.Fatalf("team %s: %v %+v", name, err, b.Decision)
		}
		g.r.Finish(&b, &Outcome{Served: true, Deployment: "d0", PromptTokens: 7, CompletionTokens: 3})
	}
	// c keeps a slot: its request is still running
	if b, err := g.r.Begin(context.Background(), &Request{RequestID: "r", Team: teamtest.Team("c", teamtest.Limits{Par: 1}), Tokens: 10}); err != nil || !b.Decision.Allowed {
		t.Fatalf("team c: %v %+v", err, b.Decision)
	}
	has := func(n string) bool { _, ok := g.r.teams.Load(n); return ok }
	local := func(n string) bool {
		found := false
		g.r.local.Teams(func(m string) { found = found || m == n })
		return found
	}
	all := func(string) bool { return true }
	g.r.ForgetTeams(all)
	if !has("a") || !has("b") || !has("c") {
		t.Fatalf("records dropped with writes pending: a %v, b %v, c %v", has("a"), has("b"), has("c"))
	}
	// the usage rows wait 10 s from the first round and go out at 20 s
	for range 3 {
		g.advance(10 * time.Second)
		if !g.step(t) {
			t.Fatal("writer step failed")
		}
	}
	g.r.ForgetTeams(func(n string) bool { return n == "a" || n == "c" })
	if has("a") || local("a") {
		t.Fatalf("team a, idle: record present %v, local fallback state present %v; want both dropped", has("a"), local("a"))
	}
	if !has("b") {
		t.Fatal("team b's record dropped, but ForgetTeams was not asked to")
	}
	if !has("c") {
		t.Fatal("team c's record (a live slot) dropped")
	}
	if usage := g.m.HGet("sy:{team:a}:usage", "d0|req"); usage != "1" {
		t.Fatalf("team a's usage %q requests in Redis: its pending writes must go out before its record is dropped", usage)
	}
}
