package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// lossyStore runs pipelines but, while lose is set, reports every command
// failed: Redis applied them and the reply was lost (a timeout in an
// unknown state).
type lossyStore struct {
	Store
	lose atomic.Bool
}

func (l *lossyStore) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	cmds, err := l.Store.Pipelined(ctx, fn)
	if l.lose.Load() {
		for _, c := range cmds {
			c.SetErr(context.DeadlineExceeded)
		}
		return cmds, context.DeadlineExceeded
	}
	return cmds, err
}

// lossyUsage is a RedisUsage on a miniredis whose replies ls can lose,
// and the client under it.
func lossyUsage(t *testing.T) (*RedisUsage, *lossyStore, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	ls := &lossyStore{Store: c}
	return NewRedisUsage(ls, "sy:", 50*time.Millisecond, 1, clk.Now, &countObs{}), ls, c
}

// TestRedisUsageLostReplyNotCountedTwice: a flush whose reply was lost
// although Redis applied it is sent again, and Redis counts it once (SPEC
// 9: a write is never applied twice); the counts recorded meanwhile are
// counted too, once.
func TestRedisUsageLostReplyNotCountedTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		losses int   // flushes in a row whose reply is lost
		later  int64 // requests recorded after the first lost flush
	}{
		{name: "one lost reply", losses: 1},
		{name: "two lost replies", losses: 2},
		{name: "lost reply, then more counts", losses: 1, later: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ls, c := lossyUsage(t)
			ctx := context.Background()
			if err := usageRecordScript.Load(ctx, c).Err(); err != nil { // so the lost calls ran
				t.Fatal(err)
			}
			for range 3 {
				u.Record("dep", 100)
			}
			ls.lose.Store(true)
			for i := range tc.losses {
				u.flush(ctx)
				if i == 0 {
					for range tc.later {
						u.Record("dep", 10)
					}
				}
			}
			ls.lose.Store(false)
			u.flush(ctx)
			u.flush(ctx)
			u.refresh(ctx)
			wantR, wantT := 3+tc.later, 300+10*tc.later
			if rpm, tpm := u.Usage("dep"); rpm != wantR || tpm != wantT {
				t.Fatalf("usage %d/%d after lost replies, want %d/%d (each request counted once)", rpm, tpm, wantR, wantT)
			}
		})
	}
}

// TestRedisUsageForgetsDeletedDeployments: the records of deployments the
// catalog no longer has (deleted through the admin API) are dropped at the
// next step, here and in the local estimate, so refreshes stop reading
// them; one whose write has not reached Redis yet is kept until it has.
// Before, every deployment ever asked for kept its record for good.
func TestRedisUsageForgetsDeletedDeployments(t *testing.T) {
	u, ls, _ := lossyUsage(t)
	ctx := context.Background()
	known := func() (ids []string) {
		u.deps.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
		slices.Sort(ids)
		return ids
	}
	u.Record("kept", 10)
	u.Record("gone", 10)
	u.Usage("asked") // known from being asked for
	u.Step(ctx)
	u.ForgetDeployments(func(id string) bool { return id != "kept" })
	u.Step(ctx)
	if got := fmt.Sprint(known()); got != "[kept]" {
		t.Fatalf("records after the deletions: %s, want [kept]", got)
	}
	if _, ok := u.local.deps.Load("gone"); ok {
		t.Fatal("the local estimate kept a deleted deployment")
	}
	// a write that did not reach Redis keeps its record until it has
	u.Record("pending", 10)
	ls.lose.Store(true)
	u.Step(ctx)
	u.ForgetDeployments(func(id string) bool { return id == "pending" })
	u.Step(ctx)
	if got := fmt.Sprint(known()); got != "[kept pending]" {
		t.Fatalf("with its write in flight: %s, want [kept pending]", got)
	}
	ls.lose.Store(false)
	u.Step(ctx) // the write lands
	u.ForgetDeployments(func(id string) bool { return id == "pending" })
	u.Step(ctx)
	if got := fmt.Sprint(known()); got != "[kept]" {
		t.Fatalf("once written: %s, want [kept]", got)
	}
}
