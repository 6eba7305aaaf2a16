package ratelimit

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"switchyard/internal/fakeclock"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/internal/redistest"
)

// TestMain silences go-redis's dial-failure log lines, which the fault tests
// provoke by the hundred.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_700_000_000, 0)) }

// limitsOf builds a team.
type limitsOf struct {
	rpm, tpm, par int64
	usd           float64
	period        time.Duration
}

func newTeam(name string, l limitsOf) *catalog.Team {
	return &catalog.Team{Team: config.Team{
		Name: name, RPM: l.rpm, TPM: l.tpm, MaxParallel: l.par,
		Budget: config.Budget{USD: l.usd, Period: l.period},
	}}
}

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

// settle writes everything the limiter's flusher holds, synchronously.
func settle(t *testing.T, l Limiter) {
	t.Helper()
	r, ok := l.(*Redis)
	if !ok {
		return
	}
	waitUntil(t, 5*time.Second, "the flusher to drain", func() bool {
		r.fl.flush(context.Background())
		return r.fl.empty()
	})
}

// redisServer is a real redis-server on a free loopback port, for the
// cluster and fault tests (skipped when the binary is missing).
type redisServer = redistest.Server

func startRedisServer(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	return redistest.Start(t, extra...)
}

// burst runs n Admits concurrently, the i-th on limiters[i%len], and returns
// the decisions.
func burst(t *testing.T, limiters []Limiter, a func(i int) Admission, n int) []Decision {
	t.Helper()
	out := make([]Decision, n)
	errs := make([]error, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			out[i], errs[i] = limiters[i%len(limiters)].Admit(context.Background(), a(i))
		}()
	}
	runtime.Gosched()
	start.Done()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
	}
	return out
}

func countAllowed(ds []Decision) (n int) {
	for _, d := range ds {
		if d.Allowed {
			n++
		}
	}
	return n
}

func reqID(i int) string { return fmt.Sprintf("req-%d", i) }
