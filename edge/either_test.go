package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file tests SPEC 9's "a decision is shared or local, never both":
// whichever of the two answers a request, the other learns of it before it
// decides again.

// failClient fails every script call while fail is set, as a connection
// reset would: the call never reached Redis.
type failClient struct {
	Client
	fail atomic.Bool
}

func (f *failClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if f.fail.Load() {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errors.New("read: connection reset by peer"))
		return cmd
	}
	return f.Client.EvalSha(ctx, sha, keys, args...)
}

// TestRedisLearnsWhatTheFallbackAdmitted: admissions whose script call
// failed are decided locally, and the team's next script call carries the
// local TATs, so Redis does not admit those requests a second time: the
// total stays at the limit. Before, Redis admitted its whole remaining
// allowance on top of the local admissions (13 of rpm 10 here).
func TestRedisLearnsWhatTheFallbackAdmitted(t *testing.T) {
	for _, dim := range []string{"rpm", "tpm"} {
		t.Run(dim, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			fc := &failClient{Client: g.c}
			g.r.c = fc
			team, tokens := newTeam("learn-"+dim, limitsOf{rpm: 10}), int64(0)
			if dim == "tpm" {
				team, tokens = newTeam("learn-"+dim, limitsOf{tpm: 1000}), 100
			}
			admitted := map[bool]int{} // local -> count
			run := func(n int) {
				for range n {
					b := begin(t, g.r, team, tokens)
					if b.Decision.Allowed {
						admitted[b.Local]++
					}
				}
			}
			run(4) // in Redis
			fc.fail.Store(true)
			run(3) // local: the fallback knows the 4 and admits 3 more
			fc.fail.Store(false)
			run(10) // in Redis again: 3 left
			if admitted[false] != 7 || admitted[true] != 3 {
				t.Fatalf("admitted %d in Redis and %d locally, want 7 and 3 (10 in all)", admitted[false], admitted[true])
			}
			if g.obs.fallbacks.Load() != 3 {
				t.Fatalf("%d fallbacks, want 3", g.obs.fallbacks.Load())
			}
			// the carry is sent once: a quiet minute later the team has its
			// whole allowance in Redis again
			g.advance(time.Minute)
			admitted = map[bool]int{}
			run(12)
			if admitted[false] != 10 || admitted[true] != 0 {
				t.Fatalf("a minute later: admitted %d in Redis and %d locally, want 10 and 0", admitted[false], admitted[true])
			}
		})
	}
}

// lateClient holds the answer of the first script call until release is
// closed: the call succeeded in Redis, and its goroutine did not run again
// for a while (a starved node: CPU-bound neighbours, a GC pause, -race).
type lateClient struct {
	Client
	first   atomic.Bool
	called  chan struct{}
	release chan struct{}
}

func (l *lateClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := l.Client.EvalSha(ctx, sha, keys, args...)
	if l.first.CompareAndSwap(false, true) {
		close(l.called)
		<-l.release
	}
	return cmd
}

// TestLateBatchDelaysItsFollowers: admissions queued behind a call whose
// answer is late are decided in Redis when it settles, not locally on a
// timer of their own. Before, they gave up after twice redis.timeout and the
// fallback, not yet knowing what the late call had admitted, admitted them
// on top of it: the 3000-admission burst test admitted 156 of rpm 100 on a
// loaded CI machine.
func TestLateBatchDelaysItsFollowers(t *testing.T) {
	const timeout = 20 * time.Millisecond
	g := newMiniRig(t, Config{OneShard: true, Timeout: timeout}, false)
	begin(t, g.r, newTeam("warm", limitsOf{rpm: 10}), 0) // loads the script
	lc := &lateClient{Client: g.c, called: make(chan struct{}), release: make(chan struct{})}
	g.r.c = lc
	team := newTeam("late", limitsOf{rpm: 10})
	const n = 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[bool]int{}
	run := func(i int) {
		defer wg.Done()
		b, err := g.r.Begin(context.Background(), &Request{RequestID: reqID(i), Team: team})
		if err != nil {
			t.Error(err)
			return
		}
		if b.Decision.Allowed {
			mu.Lock()
			admitted[b.Local]++
			mu.Unlock()
		}
	}
	wg.Add(1)
	go run(0)
	<-lc.called // the first call was answered, and its goroutine is held
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go run(i)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		g.r.comb.mu.Lock()
		q := len(g.r.comb.queue)
		g.r.comb.mu.Unlock()
		if q == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d admissions queued", q, n-1)
		}
	}
	time.Sleep(4 * timeout) // well past the old give-up (twice the timeout)
	close(lc.release)
	wg.Wait()
	if admitted[false] != 10 || admitted[true] != 0 {
		t.Fatalf("rpm 10: %d admitted in Redis, %d locally; want 10 and 0", admitted[false], admitted[true])
	}
	if f := g.obs.fallbacks.Load(); f != 0 {
		t.Fatal(fmt.Sprint(f, " fallbacks"))
	}
}
