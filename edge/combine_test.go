package edge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
)

// gateClient holds the first EVALSHA until release is closed and counts the
// script calls sent alone and the pipelines.
type gateClient struct {
	Client
	release      chan struct{}
	first        atomic.Bool
	alone, pipes atomic.Int64
	piped        atomic.Int64
	beforePipe   func()
}

func (g *gateClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	g.alone.Add(1)
	if g.first.CompareAndSwap(false, true) {
		<-g.release
	}
	return g.Client.EvalSha(ctx, sha, keys, args...)
}

func (g *gateClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if g.pipes.Add(1) == 1 && g.beforePipe != nil {
		g.beforePipe()
	}
	cmds, err := g.Client.Pipelined(ctx, fn)
	g.piped.Add(int64(len(cmds)))
	return cmds, err
}

// TestAdmissionsOfManyTeamsShareARoundTrip: on one shard, the admissions of
// 40 different teams that arrive while a call is in flight go out together,
// one pipeline with one script call per team, and each is decided in Redis
// with its own team's answer. On Cluster (OneShard off) every team batches
// alone, as before: 40 calls.
func TestAdmissionsOfManyTeamsShareARoundTrip(t *testing.T) {
	for _, oneShard := range []bool{true, false} {
		t.Run(fmt.Sprintf("one-shard=%v", oneShard), func(t *testing.T) {
			rig := newMiniRig(t, Config{OneShard: oneShard, Timeout: 5 * time.Second}, false)
			gc := &gateClient{Client: rig.c, release: make(chan struct{})}
			rig.r.c = gc
			const n = 40
			teams := make([]*catalog.Team, n)
			for i := range teams {
				teams[i] = newTeam(fmt.Sprintf("t%d", i), limitsOf{rpm: int64(10 + i)})
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			got := make([]Begun, n)
			run := func(i int) {
				defer wg.Done()
				b, err := rig.r.Begin(ctx, &Request{RequestID: reqID(i), Team: teams[i], Tokens: 1})
				if err != nil {
					t.Error(err)
				}
				got[i] = b
			}
			wg.Add(1)
			go run(0)
			for gc.alone.Load() == 0 { // the first call is in flight (held)
				time.Sleep(time.Millisecond)
			}
			wg.Add(n - 1)
			for i := 1; i < n; i++ {
				go run(i)
			}
			if oneShard {
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
					rig.r.comb.mu.Lock()
					q := len(rig.r.comb.queue)
					rig.r.comb.mu.Unlock()
					if q == n-1 || time.Now().After(deadline) {
						break
					}
				}
			}
			close(gc.release)
			wg.Wait()
			for i, b := range got {
				if !b.Decision.Allowed || b.Local {
					t.Fatalf("team %d: allowed %v local %v", i, b.Decision.Allowed, b.Local)
				}
				if b.Decision.LimitRequests != int64(10+i) || b.Decision.RemainingRequests != int64(10+i-1) {
					t.Fatalf("team %d got another team's answer: limit %d remaining %d", i, b.Decision.LimitRequests, b.Decision.RemainingRequests)
				}
			}
			if oneShard {
				if gc.alone.Load() != 1 || gc.pipes.Load() != 1 || gc.piped.Load() != n-1 {
					t.Fatalf("round trips: %d alone, %d pipelines carrying %d calls; want 1, 1 and %d", gc.alone.Load(), gc.pipes.Load(), gc.piped.Load(), n-1)
				}
			} else if gc.alone.Load() != n || gc.pipes.Load() != 0 {
				t.Fatalf("cluster: %d calls alone, %d pipelines; want %d and 0", gc.alone.Load(), gc.pipes.Load(), n)
			}
			if rig.obs.fallbacks.Load() != 0 {
				t.Fatalf("%d fallbacks", rig.obs.fallbacks.Load())
			}
		})
	}
}

// TestPipelinedAdmissionsAfterScriptFlush: a pipelined batch whose script
// Redis no longer knows (SCRIPT FLUSH, a restart) is sent again with EVAL and
// decided in Redis.
func TestPipelinedAdmissionsAfterScriptFlush(t *testing.T) {
	rig := newMiniRig(t, Config{OneShard: true, Timeout: 5 * time.Second}, false)
	ctx := context.Background()
	gc := &gateClient{Client: rig.c, release: make(chan struct{})}
	gc.beforePipe = func() { rig.c.ScriptFlush(ctx) }
	rig.r.c = gc
	teams := []*catalog.Team{newTeam("a", limitsOf{rpm: 5}), newTeam("b", limitsOf{rpm: 7}), newTeam("a", limitsOf{rpm: 5})}
	got := make([]Begun, len(teams))
	var wg sync.WaitGroup
	run := func(i int) {
		defer wg.Done()
		x, err := rig.r.Begin(ctx, &Request{RequestID: reqID(i), Team: teams[i], Tokens: 1})
		if err != nil {
			t.Error(err)
		}
		got[i] = x
	}
	wg.Add(1)
	go run(0)
	for gc.alone.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(2)
	go run(1)
	go run(2)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		rig.r.comb.mu.Lock()
		q := len(rig.r.comb.queue)
		rig.r.comb.mu.Unlock()
		if q == 2 || time.Now().After(deadline) {
			break
		}
	}
	close(gc.release)
	wg.Wait()
	if gc.pipes.Load() != 2 {
		t.Fatalf("%d pipelines; want 2 (EVALSHA, then EVAL after NOSCRIPT)", gc.pipes.Load())
	}
	for i, x := range got {
		if !x.Decision.Allowed || x.Local {
			t.Fatalf("%d: allowed %v local %v", i, x.Decision.Allowed, x.Local)
		}
	}
	if r := got[2].Decision.RemainingRequests; r != 3 {
		t.Fatalf("team a's second admission: remaining %d, want 3", r)
	}
	if rig.obs.fallbacks.Load() != 0 {
		t.Fatalf("%d fallbacks", rig.obs.fallbacks.Load())
	}
}
