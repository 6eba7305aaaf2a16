package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/internal/fakeclock"
	"switchyard/routing"
)

// redisRouter is a router whose deployment quotas are counted cluster-wide
// by a RedisUsage on miniredis, all on one fake clock.
func redisRouter(t *testing.T, rpm int64) (*routing.Router, *RedisUsage, *fakeclock.Clock, *miniredis.Miniredis, *catalog.Snapshot) {
	t.Helper()
	m := miniredis.RunT(t)
	clk := newFakeClock() // 20 s into a minute
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	u := NewRedisUsage(c, "sy:", 50*time.Millisecond, 1, clk.Now, &countObs{})
	r := routing.NewRouter(config.Routing{DefaultStrategy: "simple_shuffle", CooldownBase: 5 * time.Second, CooldownMax: time.Minute, FailuresBeforeCooldown: 3}, clk, 1, nil, u)
	d := &catalog.Deployment{Deployment: config.Deployment{ID: "A", Model: "m", Weight: 1, RPM: rpm}, Ops: catalog.OpChat, On: true, Tools: true}
	s := &catalog.Snapshot{
		Deployments: map[string]*catalog.Deployment{"A": d},
		Models:      map[string]*catalog.Model{"m": {Name: "m", Strategy: "simple_shuffle", Pool: []*catalog.Deployment{d}, Ops: catalog.OpChat}},
		Chains:      map[catalog.ChainKey][]string{},
	}
	return r, u, clk, m, s
}

func planFor(t *testing.T, r *routing.Router, s *catalog.Snapshot) *routing.Plan {
	t.Helper()
	p, err := r.Plan(routing.PlanInput{Snapshot: s, Model: "m", MaxAttempts: 3, Profile: routing.Profile{Op: catalog.OpChat, PromptTokens: 10, OutputTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An attempt the gateway withdraws (never sent, SPEC 7.1) was counted
// against its deployment's quota when it was handed out; withdrawn, it must
// stop counting cluster-wide (SPEC 5, 9), whether its count was still
// unwritten or already written to Redis by the background writer.
func TestHostile5RedisUsageWithdrawnAttempt(t *testing.T) {
	for _, written := range []bool{false, true} {
		r, u, _, m, s := redisRouter(t, 1)
		ctx := context.Background()
		a, more := planFor(t, r, s).Next()
		if !more {
			t.Fatal("no first attempt")
		}
		if written {
			u.Step(ctx) // the writer wrote the count before the withdrawal
		}
		a.Withdraw()
		u.Step(ctx)
		if req, tok := u.Usage("A"); req != 0 || tok != 0 {
			t.Fatalf("written=%v: usage %d/%d after the withdrawal, want 0/0", written, req, tok)
		}
		if got := m.HGet("sy:{dep:A}:usage", "r"); got != "" && got != "0" {
			t.Fatalf("written=%v: Redis still counts %s requests", written, got)
		}
		b, more := planFor(t, r, s).Next()
		if !more {
			t.Fatalf("written=%v: the deployment is over its quota after a withdrawn attempt", written)
		}
		b.Done(routing.Outcome{Status: 200, Class: routing.ClassOK, Latency: time.Millisecond})
		u.Step(ctx)
		if req, _ := u.Usage("A"); req != 1 {
			t.Fatalf("written=%v: usage %d after one request sent, want 1", written, req)
		}
	}
}

// The cluster-wide counter estimates a sliding minute (this minute plus the
// part of the previous one still inside the last 60 s): when it is over
// quota, the wait reported is until that estimate has room, not until the
// next wall-clock minute.
func TestHostile5RedisUsageQuotaRetryAfter(t *testing.T) {
	r, u, clk, m, s := redisRouter(t, 2)
	ctx := context.Background()
	for range 2 { // t=20 s into minute M
		a, more := planFor(t, r, s).Next()
		if !more {
			t.Fatal("no attempt under quota")
		}
		a.Done(routing.Outcome{Status: 200, Class: routing.ClassOK, Latency: time.Millisecond})
	}
	u.Step(ctx)
	// 10 s into minute M+1: the previous minute counts 2 x 50/60 = 1.67 -> 2.
	clk.Advance(50 * time.Second)
	m.SetTime(clk.Now())
	u.Step(ctx)
	p := planFor(t, r, s)
	if _, more := p.Next(); more {
		t.Fatal("attempt over quota")
	}
	// Room when 2 x (1-f) rounds to 1 or less: f > 0.25, 15 s into the minute.
	got := p.Result().RetryAfter
	if got < 5*time.Second || got > 5*time.Second+10*time.Millisecond {
		t.Fatalf("retry after %v, want about 5s (the sliding estimate has room then), not the next minute", got)
	}
	clk.Advance(got)
	m.SetTime(clk.Now())
	u.Step(ctx)
	if _, more := planFor(t, r, s).Next(); !more {
		t.Fatal("no room after the wait reported")
	}
}
