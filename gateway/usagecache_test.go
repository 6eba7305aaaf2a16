package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/edge"
)

// TestUsageReads: asks of one query share a read while it runs and for
// usageFresh after it; another query, an older read or a failed one reads
// again; a waiting ask is bounded by its own context, and the first ask
// going away does not fail the read the others wait for.
func TestUsageReads(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	u := newUsageReads(func() time.Time { return now })
	var reads atomic.Int32
	report := func(n int) edge.UsageReport { return edge.UsageReport{Rows: make([]edge.UsageRow, n)} }
	read := func(n int) func(context.Context) (edge.UsageReport, error) {
		return func(context.Context) (edge.UsageReport, error) { reads.Add(1); return report(n), nil }
	}
	ctx := context.Background()
	ask := func(q string, n int) int {
		rep, err := u.get(ctx, q, read(n))
		if err != nil {
			t.Fatal(err)
		}
		return len(rep.Rows)
	}
	if ask("all", 1) != 1 || ask("all", 2) != 1 || reads.Load() != 1 {
		t.Fatalf("second ask within usageFresh: %d reads", reads.Load())
	}
	if ask("team=a", 3) != 3 || reads.Load() != 2 {
		t.Fatal("another query shares nothing")
	}
	now = now.Add(usageFresh)
	if ask("all", 4) != 4 || reads.Load() != 3 {
		t.Fatal("a read usageFresh old is read again")
	}
	// a failed read is not kept
	_, err := u.get(ctx, "bad", func(context.Context) (edge.UsageReport, error) {
		reads.Add(1)
		return edge.UsageReport{}, errors.New("down")
	})
	if err == nil || ask("bad", 5) != 5 || reads.Load() != 5 {
		t.Fatalf("after a failed read: %v, %d reads", err, reads.Load())
	}

	// asks while a read runs wait for it; the first ask's context ending
	// does not end the read
	release := make(chan struct{})
	started := make(chan struct{})
	lctx, cancelLeader := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, err := u.get(lctx, "slow", func(rctx context.Context) (edge.UsageReport, error) {
			close(started)
			<-release
			if rctx.Err() != nil {
				return edge.UsageReport{}, rctx.Err()
			}
			return report(6), nil
		})
		if err != nil || len(rep.Rows) != 6 {
			t.Errorf("leader: %v %d", err, len(rep.Rows))
		}
	}()
	<-started
	cancelLeader()
	wctx, cancelWaiter := context.WithCancel(ctx)
	cancelWaiter()
	if _, err := u.get(wctx, "slow", read(7)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	got := make(chan int)
	go func() {
		rep, err := u.get(ctx, "slow", read(8))
		if err != nil {
			got <- -1
			return
		}
		got <- len(rep.Rows)
	}()
	close(release)
	if n := <-got; n != 6 {
		t.Fatalf("waiter got %d rows, want the leader's 6", n)
	}
	wg.Wait()
}

// TestUsageReadsBounded: distinct queries past maxUsageReads do not grow
// the map.
func TestUsageReadsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	u := newUsageReads(func() time.Time { return now })
	for i := range 10 * maxUsageReads {
		_, _ = u.get(context.Background(), string(rune('a'+i%26))+time.Duration(i).String(), func(context.Context) (edge.UsageReport, error) { return edge.UsageReport{}, nil })
	}
	if n := len(u.reads); n > maxUsageReads {
		t.Fatalf("%d reads kept, want at most %d", n, maxUsageReads)
	}
}
