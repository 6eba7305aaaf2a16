package ratelimit

import (
	"context"
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
			m := miniredis.RunT(t)
			clk := newFakeClock()
			m.SetTime(clk.Now())
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
			defer c.Close()
			ls := &lossyStore{Store: c}
			u := NewRedisUsage(ls, "sy:", 50*time.Millisecond, 1, clk.Now, &countObs{})
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
