package sessions

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

type countObs struct{ fallbacks, dropped atomic.Int64 }

func (o *countObs) OnFallback(string) { o.fallbacks.Add(1) }
func (o *countObs) OnDropped(n int)   { o.dropped.Add(int64(n)) }

func newRedisStore(t *testing.T, addr string, obs Observer) *Redis {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := NewRedis(c, "sy:", 100*time.Millisecond, NewLocal(time.Now, 1000), obs)
	return s
}

// waitFor polls cond with a deadline: the writer is asynchronous.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestRedisPinsSharedAcrossReplicas(t *testing.T) {
	mr := miniredis.RunT(t)
	obs := &countObs{}
	a, b := newRedisStore(t, mr.Addr(), obs), newRedisStore(t, mr.Addr(), obs)
	ctx := context.Background()
	_ = a.SetTier(ctx, "team:s1|normal", "hard", time.Minute)
	_ = a.SetDeployment(ctx, "team:s1|m", "dep-7", time.Minute)
	// read-your-writes on the writing replica, before the flush
	if v, ok, _ := a.GetTier(ctx, "team:s1|normal"); !ok || v != "hard" {
		t.Fatalf("own write: %q %v", v, ok)
	}
	waitFor(t, "pin visible on replica b", func() bool {
		v, ok, _ := b.GetTier(ctx, "team:s1|normal")
		d, ok2, _ := b.GetDeployment(ctx, "team:s1|m")
		return ok && v == "hard" && ok2 && d == "dep-7"
	})
	if ttl := mr.TTL("sy:pin:t:team:s1|normal"); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("pin key must carry its TTL, got %v", ttl)
	}
	mr.FastForward(2 * time.Minute)
	if _, ok, _ := b.GetTier(ctx, "team:s1|normal"); ok {
		t.Fatal("pin must expire with its TTL")
	}
}

func TestRedisPinsFallBackAndReplay(t *testing.T) {
	mr := miniredis.RunT(t)
	obs := &countObs{}
	a := newRedisStore(t, mr.Addr(), obs)
	ctx := context.Background()
	addr := mr.Addr()
	mr.Close()
	_ = a.SetTier(ctx, "team:s2|normal", "hard", time.Minute)
	waitFor(t, "a failed flush", func() bool { return true })
	start := time.Now()
	if v, ok, err := a.GetDeployment(ctx, "team:s2|none"); ok || err != nil || v != "" {
		t.Fatalf("down redis: %q %v %v", v, ok, err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("a read waited far longer than the timeout")
	}
	if obs.fallbacks.Load() == 0 {
		t.Fatal("fallback not counted")
	}
	// the local copy answers while Redis is down (after the pending write is gone too)
	mr2 := miniredis.NewMiniRedis()
	if err := mr2.StartAddr(addr); err != nil {
		t.Skip("could not restart miniredis on the same port:", err)
	}
	defer mr2.Close()
	waitFor(t, "pending pin replayed into Redis", func() bool {
		v, err := mr2.Get("sy:pin:t:team:s2|normal")
		return err == nil && v == "hard"
	})
}

func TestRedisCloseFlushes(t *testing.T) {
	mr := miniredis.RunT(t)
	a := newRedisStore(t, mr.Addr(), &countObs{})
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		_ = a.SetDeployment(ctx, "team:s|m"+string(rune('a'+i%26))+string(rune('a'+i/26)), "d", time.Minute)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if n := len(mr.Keys()); n != 100 {
		t.Fatalf("clean shutdown lost pins: %d of 100 in Redis", n)
	}
}

// TestRedisTierPinEscalateOnlyAcrossReplicas: a replica that has not seen
// another's "hard" pin yet and writes "easy" must not lower it.
func TestRedisTierPinEscalateOnlyAcrossReplicas(t *testing.T) {
	mr := miniredis.RunT(t)
	a, b := newRedisStore(t, mr.Addr(), &countObs{}), newRedisStore(t, mr.Addr(), &countObs{})
	ctx := context.Background()
	_ = a.SetTier(ctx, "team:s9|normal", "hard", time.Minute)
	waitFor(t, "hard pin in Redis", func() bool { v, _ := mr.Get("sy:pin:t:team:s9|normal"); return v == "hard" })
	mr.FastForward(30 * time.Second)
	_ = b.SetTier(ctx, "team:s9|normal", "easy", time.Minute) // b never saw the pin
	waitFor(t, "TTL refreshed by b's write", func() bool { return mr.TTL("sy:pin:t:team:s9|normal") > 45*time.Second })
	if v, _ := mr.Get("sy:pin:t:team:s9|normal"); v != "hard" {
		t.Fatalf("an easy write lowered the hard pin to %q", v)
	}
}
