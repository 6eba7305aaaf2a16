package edge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/internal/teamtest"
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
			team, tokens := teamtest.Team("learn-"+dim, teamtest.Limits{RPM: 10}), int64(0)
			if dim == "tpm" {
				team, tokens = teamtest.Team("learn-"+dim, teamtest.Limits{TPM: 1000}), 100
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

// TestLateAnswerFollowersStayExact: admissions queued behind a call whose
// answer came back late (its goroutine starved past their redis.timeout)
// are decided locally when it settles, by a fallback that has learnt the
// late answer: exactly the limit in all. Before, they gave up on a timer of
// their own and the fallback, not yet knowing what the late call had
// admitted, admitted on top of it (11 of rpm 10 here; 156 of rpm 100 in the
// 3000-admission burst test on a loaded CI machine).
func TestLateAnswerFollowersStayExact(t *testing.T) {
	const timeout = 100 * time.Millisecond // the first call must be answered within it, even on a loaded machine
	g := newMiniRig(t, Config{OneShard: true, Timeout: timeout}, false)
	begin(t, g.r, teamtest.Team("warm", teamtest.Limits{RPM: 10}), 0) // loads the script
	lc := &lateClient{Client: g.c, called: make(chan struct{}), release: make(chan struct{})}
	g.r.c = lc
	team := teamtest.Team("late", teamtest.Limits{RPM: 10})
	const n = 30
	admitted := burstBehind(t, g, team, n, lc.called, func() {
		time.Sleep(4 * timeout) // past every follower's redis.timeout
		close(lc.release)
	})
	if admitted[false]+admitted[true] != 10 || admitted[false] != 1 {
		t.Fatalf("rpm 10: %d admitted in Redis, %d locally; want 1 (the late call) and 9", admitted[false], admitted[true])
	}
}

// slowClient answers no script call before its deadline: a Redis that
// takes the whole redis.timeout. It counts the calls it was sent.
type slowClient struct {
	Client
	calls  atomic.Int64
	called chan struct{}
}

func (s *slowClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if s.calls.Add(1) == 1 {
		close(s.called)
	}
	<-ctx.Done()
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ctx.Err())
	return cmd
}

// TestQueuedAdmissionWaitsOneTimeout: an admission queued behind a call that
// takes the whole redis.timeout is not sent after it (its own timeout is
// spent), but decided locally at once (SPEC 9: the request path never waits
// more than redis.timeout). Before, its batch was sent after the first with
// a timeout of its own: twice redis.timeout.
func TestQueuedAdmissionWaitsOneTimeout(t *testing.T) {
	const timeout = time.Second // the first follower must queue within a quarter of it, even on a loaded machine
	g := newMiniRig(t, Config{OneShard: true, Timeout: timeout}, false)
	sc := &slowClient{Client: g.c, called: make(chan struct{})}
	g.r.c = sc
	team := teamtest.Team("slow", teamtest.Limits{RPM: 10})
	admitted := burstBehind(t, g, team, 30, sc.called, nil)
	if sc.calls.Load() != 1 {
		t.Fatalf("%d script calls sent; want 1: the queued admissions' timeout had run out with the first", sc.calls.Load())
	}
	if admitted[true] != 10 || admitted[false] != 0 {
		t.Fatalf("rpm 10: %d admitted in Redis, %d locally; want 0 and 10", admitted[false], admitted[true])
	}
}

// burstBehind starts one Begin of team, waits for its script call (called),
// queues n-1 more behind it, runs then (nil: nothing) and counts the
// admissions by where they were decided.
func burstBehind(t *testing.T, g *miniRig, team *catalog.Team, n int, called <-chan struct{}, then func()) map[bool]int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[bool]int{} // local -> count
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
	<-called
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go run(i)
	}
	waitQueued(t, &g.r.comb, n-1)
	if then != nil {
		then()
	}
	wg.Wait()
	return admitted
}
