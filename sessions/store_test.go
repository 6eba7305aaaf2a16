package sessions

import (
	"context"
	"fmt"
	"runtime"
	"switchyard/internal/fakeclock"
	"sync"
	"testing"
	"time"
)

func newFakeClock() *fakeclock.Clock {
	return fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

func mustGetTier(t *testing.T, s Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.GetTier(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

func TestLocalTTLIsInactivity(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s := NewLocal(clk.Now, 100)
	const ttl = 30 * time.Minute

	if _, ok := mustGetTier(t, s, "k"); ok {
		t.Fatal("empty store has a pin")
	}
	if err := s.SetTier(ctx, "k", "easy", ttl); err != nil {
		t.Fatal(err)
	}
	clk.Advance(29 * time.Minute)
	if v, ok := mustGetTier(t, s, "k"); !ok || v != "easy" {
		t.Fatalf("before ttl: %q %v", v, ok)
	}
	// a Get does not refresh; a Set does
	_ = s.SetTier(ctx, "k", "hard", ttl)
	clk.Advance(29 * time.Minute)
	if v, ok := mustGetTier(t, s, "k"); !ok || v != "hard" {
		t.Fatalf("after refresh: %q %v", v, ok)
	}
	clk.Advance(time.Minute)
	if _, ok := mustGetTier(t, s, "k"); ok {
		t.Fatal("pin outlived its ttl of inactivity")
	}
	if s.Len() != 0 {
		t.Fatalf("expired entry kept after read: len %d", s.Len())
	}
}

func TestLocalNamespacesAndDelete(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s := NewLocal(clk.Now, 100)
	_ = s.SetTier(ctx, "k", "hard", time.Hour)
	_ = s.SetDeployment(ctx, "k", "dep-1", 5*time.Minute)
	if v, ok, _ := s.GetDeployment(ctx, "k"); !ok || v != "dep-1" {
		t.Fatalf("deployment pin %q %v", v, ok)
	}
	clk.Advance(6 * time.Minute)
	if _, ok, _ := s.GetDeployment(ctx, "k"); ok {
		t.Fatal("deployment pin outlived its ttl")
	}
	if v, ok := mustGetTier(t, s, "k"); !ok || v != "hard" {
		t.Fatal("tier pin lost with the deployment pin")
	}
	_ = s.SetTier(ctx, "k", "hard", 0)
	if _, ok := mustGetTier(t, s, "k"); ok {
		t.Fatal("ttl 0 did not remove the pin")
	}
}

func TestLocalCap(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s := NewLocal(clk.Now, 3)
	for i := range 5 {
		_ = s.SetTier(ctx, fmt.Sprint("k", i), "easy", time.Hour)
		clk.Advance(time.Second)
	}
	if s.Len() != 3 {
		t.Fatalf("len %d, want cap 3", s.Len())
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := mustGetTier(t, s, fmt.Sprint("k", i)); ok != want {
			t.Errorf("k%d present %v, want %v (least recently set goes first)", i, ok, want)
		}
	}
	// refreshing k2 makes k3 the oldest
	_ = s.SetTier(ctx, "k2", "hard", time.Hour)
	_ = s.SetTier(ctx, "k5", "easy", time.Hour)
	if _, ok := mustGetTier(t, s, "k3"); ok {
		t.Error("k3 survived although it was set longest ago")
	}
	if _, ok := mustGetTier(t, s, "k2"); !ok {
		t.Error("refreshed k2 was evicted")
	}
}

func TestLocalSweepsExpiredOnSet(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s := NewLocal(clk.Now, 100)
	for i := range 4 {
		_ = s.SetDeployment(ctx, fmt.Sprint("old", i), "d", time.Minute)
	}
	clk.Advance(2 * time.Minute)
	_ = s.SetDeployment(ctx, "new1", "d", time.Minute)
	_ = s.SetDeployment(ctx, "new2", "d", time.Minute)
	if s.Len() != 2 {
		t.Fatalf("len %d: expired entries not reclaimed by Sets", s.Len())
	}
}

func TestLocalShardedCap(t *testing.T) {
	ctx := context.Background()
	s := NewLocal(nil, 2048)
	for i := range 10000 {
		_ = s.SetTier(ctx, fmt.Sprint("key-", i), "easy", time.Hour)
	}
	if n := s.Len(); n > 2048 || n < 1500 {
		t.Fatalf("len %d, want <= 2048 and most of it used", n)
	}
}

func TestLocalConcurrent(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s := NewLocal(clk.Now, 1024)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint("k", (g*7919+i)%1500)
				switch i % 4 {
				case 0:
					_ = s.SetTier(ctx, k, "hard", time.Minute)
				case 1:
					_, _, _ = s.GetTier(ctx, k)
				case 2:
					_ = s.SetDeployment(ctx, k, "d", time.Minute)
				default:
					_, _, _ = s.GetDeployment(ctx, k)
					if i%100 == 3 {
						clk.Advance(10 * time.Second)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := s.Len(); n > 1024 {
		t.Fatalf("len %d over cap", n)
	}
}

func TestScopedKey(t *testing.T) {
	if ScopedKey("t:id:0123", "normal") == ScopedKey("t:id:0123", "fast") {
		t.Fatal("scopes collide")
	}
}

func BenchmarkLocal(b *testing.B) {
	ctx := context.Background()
	s := NewLocal(nil, DefaultMaxEntries)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("team:id:", i)
		_ = s.SetTier(ctx, keys[i], "easy", time.Hour)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			_, _, _ = s.GetTier(ctx, k)
			_ = s.SetTier(ctx, k, "hard", time.Hour)
			i++
		}
	})
}

// TestLocalRenewTierKeepsARecentPin: RenewTier leaves a pin of the same
// value set under a ninth of its TTL ago as it is (its expiry too), and
// sets it otherwise.
func TestLocalRenewTierKeepsARecentPin(t *testing.T) {
	clk := newFakeClock()
	s := NewLocal(clk.Now, 100)
	const ttl = time.Hour
	for i, step := range []struct {
		wait  time.Duration
		value string
		kept  bool
	}{
		{0, "d1", false},               // new: set
		{5 * time.Minute, "d1", true},  // 5m after the set: kept, expiry unchanged
		{3 * time.Minute, "d1", false}, // 8m after the set (past 6m40s): renewed
		{time.Minute, "d2", false},     // another value: set
		{2 * time.Hour, "d2", false},   // expired: set again
	} {
		clk.Advance(step.wait)
		if kept := s.RenewTier("k", step.value, ttl); kept != step.kept {
			t.Fatalf("step %d: kept=%v, want %v", i, kept, step.kept)
		}
		if v, ok := mustGetTier(t, s, "k"); !ok || v != step.value {
			t.Fatalf("step %d: pin %q %v", i, v, ok)
		}
	}
	// a kept pin keeps its expiry: set, kept 5 minutes later, gone an
	// hour after the set
	s.SetTier(context.Background(), "e", "d1", ttl)
	clk.Advance(5 * time.Minute)
	if !s.RenewTier("e", "d1", ttl) {
		t.Fatal("a pin set 5 minutes ago was not kept")
	}
	clk.Advance(56 * time.Minute)
	if _, ok := mustGetTier(t, s, "e"); ok {
		t.Fatal("a kept pin's expiry moved: still there 61 minutes after it was set")
	}
}

// TestLocalHashCollision: two keys whose first hashes meet (forced here by
// editing the entry's second hash, as a 64-bit collision would look) never
// read each other's pin; the newer one takes the place.
func TestLocalHashCollision(t *testing.T) {
	ctx := context.Background()
	s := NewLocal(newFakeClock().Now, 100)
	_ = s.SetTier(ctx, "a", "easy", time.Hour)
	key, _ := s.hashes(kindTier, "a")
	sh := s.shard(key)
	sh.ents[sh.items[key]].check ^= 1 // "a" now looks like another key with a's first hash
	if v, ok := mustGetTier(t, s, "a"); ok {
		t.Fatalf("a read another key's pin: %q", v)
	}
	_ = s.SetTier(ctx, "a", "hard", time.Hour)
	if v, ok := mustGetTier(t, s, "a"); !ok || v != "hard" || s.Len() != 1 {
		t.Fatalf("after the colliding set: %q %v, len %d", v, ok, s.Len())
	}
}

// TestLocalValueCap: past maxValues distinct values, a Set of a new value is
// not stored, and the key's old pin is dropped rather than served stale;
// known values are still stored.
func TestLocalValueCap(t *testing.T) {
	ctx := context.Background()
	s := NewLocal(newFakeClock().Now, 100)
	_ = s.SetTier(ctx, "k", "v0", time.Hour)
	for i := 1; i < maxValues; i++ {
		if _, ok := s.values.ID(fmt.Sprint("v", i)); !ok {
			t.Fatalf("value %d refused under the cap", i)
		}
	}
	_ = s.SetTier(ctx, "k", "one-too-many", time.Hour)
	if v, ok := mustGetTier(t, s, "k"); ok {
		t.Fatalf("a value past the cap: read %q", v)
	}
	_ = s.SetTier(ctx, "k", "v7", time.Hour)
	if v, ok := mustGetTier(t, s, "k"); !ok || v != "v7" {
		t.Fatalf("a known value past the cap: %q %v", v, ok)
	}
}

// BenchmarkLocalGC is the cost of one garbage collection with a full
// store of DefaultMaxEntries pins: the store's share of every GC cycle of a
// gateway holding 100,000 sessions.
func BenchmarkLocalGC(b *testing.B) {
	ctx := context.Background()
	s := NewLocal(nil, DefaultMaxEntries)
	for i := range DefaultMaxEntries {
		_ = s.SetTier(ctx, fmt.Sprintf("sy:{team:t%d}:pin:dep:%d|model", i%10000, i), "deployment-"+fmt.Sprint(i%7), time.Hour)
	}
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		runtime.GC()
	}
	runtime.KeepAlive(s)
}
