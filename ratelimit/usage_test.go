package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestLocalUsageSlidingMinute: counts leave the window 60 s after they were
// recorded, on the injected clock.
func TestLocalUsageSlidingMinute(t *testing.T) {
	clk := newFakeClock()
	u := NewLocalUsage(clk.Now)
	for _, tc := range []struct {
		advance  time.Duration
		record   int64 // tokens of one request; 0: none
		rpm, tpm int64
	}{
		{0, 100, 1, 100},
		{0, 50, 2, 150},
		{30 * time.Second, 10, 3, 160},
		{29 * time.Second, 0, 3, 160},       // t=59 s: everything is inside
		{time.Second, 0, 1, 10},             // t=60 s: the first two left
		{29 * time.Second, 0, 1, 10},        // t=89 s
		{time.Second, 0, 0, 0},              // t=90 s: empty
		{10 * time.Minute, 7, 1, 7},         // slots are reused after a gap
		{500 * time.Millisecond, 7, 2, 14},  // same second
		{1500 * time.Millisecond, 7, 3, 21}, // next seconds
	} {
		clk.Advance(tc.advance)
		if tc.record > 0 {
			u.Record("d", tc.record)
		}
		if rpm, tpm := u.Usage("d"); rpm != tc.rpm || tpm != tc.tpm {
			t.Fatalf("at %v: usage %d/%d, want %d/%d", clk.Now().Sub(time.Unix(1_700_000_000, 0)), rpm, tpm, tc.rpm, tc.tpm)
		}
	}
	if rpm, tpm := u.Usage("unknown"); rpm != 0 || tpm != 0 {
		t.Fatal("unknown deployment has usage")
	}
}

// TestRedisUsageShared: two replicas' counts add up in Redis; each serves the
// cluster-wide value from its cache plus its own unwritten counts; the
// previous minute fades out linearly; a stale cache (Redis gone) switches to
// local counts × expected replicas.
func TestRedisUsageShared(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newFakeClock() // 1_700_000_000 is 20 s into a minute
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	obs := &countObs{}
	a := NewRedisUsage(c, "sy:", 50*time.Millisecond, 2, clk.Now, obs)
	b := NewRedisUsage(c, "sy:", 50*time.Millisecond, 2, clk.Now, obs)
	ctx := context.Background()

	for range 3 {
		a.Record("dep", 100)
	}
	b.Record("dep", 1000)
	if rpm, tpm := a.Usage("dep"); rpm != 6 || tpm != 600 {
		t.Fatalf("before any refresh: a sees %d/%d, want its own 3/300 × 2 replicas", rpm, tpm)
	}
	a.flush(ctx)
	b.flush(ctx)
	a.refresh(ctx)
	if rpm, tpm := a.Usage("dep"); rpm != 4 || tpm != 1300 {
		t.Fatalf("a sees %d/%d, want cluster-wide 4/1300", rpm, tpm)
	}
	a.Record("dep", 1)
	if rpm, tpm := a.Usage("dep"); rpm != 5 || tpm != 1301 {
		t.Fatalf("a sees %d/%d, want 5/1301 (cache + unwritten)", rpm, tpm)
	}
	a.flush(ctx)

	// Next minute, 10 s in (t=50 s): the previous minute still counts for 50/60.
	clk.Advance(50 * time.Second)
	m.SetTime(clk.Now())
	b.Record("dep", 60)
	b.flush(ctx)
	b.refresh(ctx)
	if rpm, tpm := b.Usage("dep"); rpm != 1+4 || tpm != 60+1084 { // 5*50/60=4.17, 1301*50/60=1084.2
		t.Fatalf("b sees %d/%d, want 5/1144", rpm, tpm)
	}
	if ttl := m.TTL("sy:{dep:dep}:usage"); ttl <= 0 {
		t.Fatal("usage key has no TTL")
	}

	// Redis gone: the cache goes stale and Usage serves local × replicas.
	m.Close()
	b.Record("dep", 40)
	b.flush(ctx) // fails: kept for the next round
	b.refresh(ctx)
	if rpm, _ := b.Usage("dep"); rpm != 5+1 {
		t.Fatalf("fresh cache: %d, want 6 (cache 5 + 1 unwritten)", rpm)
	}
	clk.Advance(3 * DefaultUsageInterval)
	clk.Advance(time.Second)
	if rpm, tpm := b.Usage("dep"); rpm != 3*2 || tpm != 1100*2 {
		t.Fatalf("stale cache: %d/%d, want b's local 3/1100 × 2 replicas", rpm, tpm)
	}
	if obs.fallbacks.Load() == 0 {
		t.Fatal("failed refresh not reported")
	}
	if err := b.Close(ctx); err == nil || obs.dropped.Load() != 1 {
		t.Fatalf("Close with Redis down: %v, dropped %d (want the 1 unwritten request)", err, obs.dropped.Load())
	}
}
