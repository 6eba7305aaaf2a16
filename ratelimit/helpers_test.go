package ratelimit

import (
	"context"
	"fmt"
	"os"
	"switchyard/internal/fakeclock"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/redistest"
)

// TestMain silences go-redis's dial-failure log lines, which the fault tests
// provoke by the hundred.
func TestMain(m *testing.M) {
	redistest.QuietLogs()
	os.Exit(m.Run())
}

func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_700_000_000, 0)) }

// countObs counts Observer events.
type countObs struct {
	fallbacks, dropped, rejects atomic.Int64
}

func (o *countObs) OnFallback(string)       { o.fallbacks.Add(1) }
func (o *countObs) OnDropped(n int)         { o.dropped.Add(int64(n)) }
func (o *countObs) OnReject(string, string) { o.rejects.Add(1) }

// waitUntil polls cond until it holds or the deadline passes: every wait in
// these tests is bounded by a context deadline.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func reqID(i int) string { return fmt.Sprintf("req-%d", i) }

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
