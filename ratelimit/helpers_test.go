package ratelimit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
)

// TestMain silences go-redis's dial-failure log lines, which the fault tests
// provoke by the hundred.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// fakeClock is a manually advanced clock (CONVENTIONS 6: no sleeps).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

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
// cluster and fault tests. It can be killed and restarted on the same port.
type redisServer struct {
	t     testing.TB
	port  int
	extra []string // more redis-server arguments
	cmd   *exec.Cmd
}

// startRedisServer starts redis-server, skipping the test when the binary
// is not installed.
func startRedisServer(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: skipping the real-Redis test (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &redisServer{t: t, port: port, extra: extra}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *redisServer) URL() string  { return "redis://" + s.Addr() }

// Start runs the server and waits (bounded) until it answers PING.
func (s *redisServer) Start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning"}, s.extra...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	waitUntil(s.t, 10*time.Second, "redis-server to answer", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *redisServer) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client is a plain client for assertions.
func (s *redisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
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
