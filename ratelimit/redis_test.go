package ratelimit

import (
	"context"
	"errors"
	"math"
	"net"
	"strconv"
	"strings"
	"switchyard/internal/fakeclock"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/config"
)

// mini is a Redis limiter on miniredis with Redis's clock on a fake clock.
type mini struct {
	m   *miniredis.Miniredis
	clk *fakeclock.Clock
	c   *redis.Client
	r   *Redis
	obs *countObs
	br  *cluster.Breaker
}

func newMini(t *testing.T, withBreaker bool) *mini {
	t.Helper()
	x := &mini{m: miniredis.RunT(t), clk: newFakeClock(), obs: &countObs{}}
	x.m.SetTime(x.clk.Now())
	if withBreaker {
		x.br = cluster.NewBreaker(3, time.Second, x.clk.Now)
		c, err := cluster.NewClientWithBreaker(config.Redis{URL: "redis://" + x.m.Addr(), Timeout: 50 * time.Millisecond}, x.br)
		if err != nil {
			t.Fatal(err)
		}
		x.c = c.(*redis.Client)
	} else {
		x.c = redis.NewClient(&redis.Options{Addr: x.m.Addr()})
	}
	t.Cleanup(func() { _ = x.c.Close() })
	x.r = NewRedis(x.c, x.br, "sy:", 50*time.Millisecond, NewLocal(x.clk.Now, 1), x.obs)
	x.r.SetRetryInterval(time.Millisecond)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = x.r.Close(ctx)
	})
	return x
}

func (x *mini) advance(d time.Duration) { x.clk.Advance(d); x.m.SetTime(x.clk.Now()) }

func (x *mini) admit(t *testing.T, team string, l limitsOf, tokens int64) Decision {
	t.Helper()
	d, err := x.r.Admit(context.Background(), Admission{RequestID: "r", Team: newTeam(team, l), Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestUnlimitedNoRoundTrip: a team without limits never reaches Redis.
func TestUnlimitedNoRoundTrip(t *testing.T) {
	x := newMini(t, false)
	waitUntil(t, 5*time.Second, "the scripts to be preloaded", func() bool {
		ok, _ := reconcileScript.Exists(context.Background(), x.c).Result()
		return len(ok) == 1 && ok[0]
	})
	before := x.m.CommandCount()
	for range 100 {
		d := x.admit(t, "free", limitsOf{}, 1000)
		if !d.Allowed {
			t.Fatal("unlimited team rejected")
		}
		x.r.Reconcile(d.Ticket, 5000, 1)
		x.r.Release(d.Ticket)
	}
	settle(t, x.r)
	if n := x.m.CommandCount() - before; n != 0 {
		t.Fatalf("unlimited team cost %d Redis commands, want 0", n)
	}
}

// TestHashTagRuleAndTTLs: every key the scripts write belongs to one slot per
// team, computed with Redis Cluster's real CRC16 (miniredis accepts
// cross-slot scripts, so it cannot catch this itself), and has a TTL.
func TestHashTagRuleAndTTLs(t *testing.T) {
	x := newMini(t, false)
	full := limitsOf{rpm: 100, tpm: 10000, par: 5, usd: 10, period: time.Hour}
	for _, team := range []string{"acme", "other team", "x{y}z"} {
		d := x.admit(t, team, full, 100)
		x.r.Reconcile(d.Ticket, 150, 0.01)
		x.r.Release(d.Ticket)
		d = x.admit(t, team, full, 100) // a held slot keeps the zset alive
		_ = d
	}
	settle(t, x.r)
	slotOf := map[string]int{}
	for _, k := range x.m.Keys() {
		i := strings.Index(k, "{team:")
		if i < 0 {
			t.Fatalf("key %q has no team hash tag", k)
		}
		tag := k[:strings.Index(k[i:], "}")+i+1]
		s := cluster.Slot(k)
		if prev, ok := slotOf[tag]; ok && prev != s {
			t.Fatalf("key %q in slot %d, other keys of its team in %d", k, s, prev)
		}
		slotOf[tag] = s
		if ttl := x.m.TTL(k); ttl <= 0 {
			t.Fatalf("key %q has no TTL", k)
		}
	}
	if len(slotOf) != 3 {
		t.Fatalf("keys of %d teams, want 3: %v", len(slotOf), x.m.Keys())
	}
	// The declared key lists, not only the keys that happened to be written.
	for _, team := range []string{"acme", "x{y}z", "}{"} {
		k := x.r.teamKeys(team)
		want := cluster.Slot(k.admit[0])
		for _, key := range append(append([]string{}, k.admit...), k.reconcile...) {
			if cluster.Slot(key) != want {
				t.Fatalf("team %q: key %q not in slot %d", team, key, want)
			}
		}
	}
}

// TestRefundRestoresCapacity is the GCRA refund trap: written as a
// negative-cost admission (redis_rate's shape) a refund larger than the
// outstanding debt is lost. The reconcile script must delete the TAT (a full
// bucket) and the capacity must come back.
func TestRefundRestoresCapacity(t *testing.T) {
	x := newMini(t, false)
	l := limitsOf{tpm: 1000}
	d := x.admit(t, "r", l, 1000)
	if !d.Allowed || d.RemainingTokens != 0 {
		t.Fatalf("reserve: %+v", d)
	}
	x.advance(50 * time.Second) // 833 tokens back, ~167 still owed
	if d2 := x.admit(t, "r", l, 900); d2.Allowed {
		t.Fatal("900 tokens fit with only 833 back")
	}
	x.r.Reconcile(d.Ticket, 10, 0) // refund 990 > 167 owed
	settle(t, x.r)
	if x.m.Exists("sy:{team:r}:tat") {
		t.Fatalf("TAT key still there after a refund beyond the debt: %q", must(x.m.Get("sy:{team:r}:tat")))
	}
	if d3 := x.admit(t, "r", l, 1000); !d3.Allowed {
		t.Fatalf("full quota not restored: %+v", d3)
	}
}

func must(s string, _ error) string { return s }

// TestReconcileIdempotent: a batch resent after an ambiguous failure (same
// sequence number) is applied once.
func TestReconcileIdempotent(t *testing.T) {
	x := newMini(t, false)
	team := newTeam("i", limitsOf{usd: 100, period: time.Hour})
	keys := x.r.teamKeys("i").reconcile
	call := scriptCall{keys: keys, args: []any{0, 0, 1.5, periodSeconds(team), 7, markTTL.Milliseconds()}}
	for range 3 {
		cmds := evalPipelined(context.Background(), x.c, reconcileScript, []scriptCall{call})
		if err := cmds[0].Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := x.m.HGet("sy:{team:i}:budget", "usd"); got != "1.5" {
		t.Fatalf("spend after 3 sends of one batch = %s, want 1.5", got)
	}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (a restart, a failover) both the
// admission and the batched writes load their script again.
func TestScriptCacheFlushed(t *testing.T) {
	x := newMini(t, false)
	l := limitsOf{rpm: 10, usd: 5, period: time.Hour}
	d := x.admit(t, "s", l, 0)
	x.r.Reconcile(d.Ticket, 0, 1)
	settle(t, x.r)
	if err := x.c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	d = x.admit(t, "s", l, 0)
	if !d.Allowed || d.RemainingRequests != 8 {
		t.Fatalf("after SCRIPT FLUSH: %+v", d)
	}
	x.r.Reconcile(d.Ticket, 0, 1)
	settle(t, x.r)
	if got := x.m.HGet("sy:{team:s}:budget", "usd"); got != "2" {
		t.Fatalf("spend %s, want 2", got)
	}
	if n := x.obs.fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks", n)
	}
}

// TestBufferedWhileDown: with Redis gone, admissions fall back to the local
// limiter, reconciles are coalesced in memory, and when Redis is back they
// are written once; Close then has nothing left.
func TestBufferedWhileDown(t *testing.T) {
	x := newMini(t, true)
	l := limitsOf{rpm: 1000, tpm: 100000, usd: 100, period: time.Hour}
	before := x.admit(t, "b", l, 100) // granted by Redis
	if before.Ticket.Local {
		t.Fatal("granted locally with Redis up")
	}
	x.m.Close()
	var want float64
	for i := range 50 {
		d := x.admit(t, "b", l, 100)
		if !d.Allowed || !d.Ticket.Local {
			t.Fatalf("admit %d with Redis down: %+v", i, d)
		}
		x.r.Reconcile(d.Ticket, 120, 0.01)
		want += 0.01
	}
	x.r.Reconcile(before.Ticket, 300, 0.5) // a Redis ticket reconciled while down
	want += 0.5
	if x.obs.fallbacks.Load() < 50 {
		t.Fatalf("fallbacks = %d, want >= 50", x.obs.fallbacks.Load())
	}
	if x.br.Up() {
		t.Fatal("breaker up with Redis gone")
	}
	if err := x.m.Restart(); err != nil {
		t.Fatal(err)
	}
	x.m.SetTime(x.clk.Now())
	x.clk.Advance(time.Second) // the breaker's cool period: the next call starts the probe
	waitUntil(t, 5*time.Second, "the buffered spend in Redis", func() bool {
		x.r.fl.signal()
		got, _ := strconv.ParseFloat(x.m.HGet("sy:{team:b}:budget", "usd"), 64)
		return math.Abs(got-want) < 1e-9
	})
	if !x.br.Up() {
		t.Fatal("breaker not up after the replay")
	}
	if !x.m.Exists("sy:{team:b}:tat") {
		t.Fatal("the Redis ticket's TPM charge was not replayed")
	}
	settle(t, x.r)
	if n := x.obs.dropped.Load(); n != 0 {
		t.Fatalf("%d updates dropped", n)
	}
}

// TestCloseFlushes: Close writes what is pending; with Redis unreachable it
// gives up at the context's deadline and counts what it lost.
func TestCloseFlushes(t *testing.T) {
	x := newMini(t, false)
	l := limitsOf{usd: 100, period: time.Hour}
	for range 10 {
		d := x.admit(t, "c", l, 0)
		x.r.Reconcile(d.Ticket, 0, 0.25)
	}
	if err := x.r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := x.m.HGet("sy:{team:c}:budget", "usd"); got != "2.5" {
		t.Fatalf("spend after Close = %s, want 2.5", got)
	}

	y := newMini(t, true)
	d := y.admit(t, "c", l, 0)
	y.m.Close()
	y.r.Reconcile(d.Ticket, 0, 1)
	y.r.Reconcile(d.Ticket, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := y.r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with Redis down = %v, want DeadlineExceeded", err)
	}
	if n := y.obs.dropped.Load(); n != 2 {
		t.Fatalf("dropped = %d, want 2", n)
	}
}

// TestHungRedisBounded: a Redis that accepts connections and never answers
// (hung, partitioned) holds no Admit longer than the timeout (+ slack), and
// the breaker then makes the fallback immediate.
func TestHungRedisBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	const timeout = 50 * time.Millisecond
	clk := newFakeClock()
	br := cluster.NewBreaker(3, time.Second, clk.Now)
	c, err := cluster.NewClientWithBreaker(config.Redis{URL: "redis://" + ln.Addr().String(), Timeout: timeout}, br)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := &countObs{}
	r := NewRedis(c, br, "sy:", timeout, NewLocal(clk.Now, 2), obs)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_ = r.Close(ctx)
	}()
	team := newTeam("h", limitsOf{rpm: 10})
	allowed := 0
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
		d, err := r.Admit(ctx, Admission{RequestID: reqID(i), Team: team})
		late := ctx.Err() // the deadline passed before Admit returned
		cancel()
		if err != nil || late != nil {
			t.Fatalf("admit %d: err %v, returned after 3×timeout: %v", i, err, late != nil)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("fallback admitted %d, want rpm 10 / 2 replicas = 5", allowed)
	}
	if br.Up() || obs.fallbacks.Load() != 20 {
		t.Fatalf("breaker up %v, fallbacks %d", br.Up(), obs.fallbacks.Load())
	}
}
