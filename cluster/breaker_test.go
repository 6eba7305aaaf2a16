package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"switchyard/internal/fakeclock"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_700_000_000, 0)) }

// changeLog records OnChange calls; the probe's calls come from its goroutine.
type changeLog struct {
	mu  sync.Mutex
	ups []bool
}

func (c *changeLog) add(up bool) {
	c.mu.Lock()
	c.ups = append(c.ups, up)
	c.mu.Unlock()
}

func (c *changeLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.ups)
}

var errDown = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}

// TestBreakerScenario walks the breaker through its states step by step:
// closed, open after the threshold, one background probe when the cool
// period ends (calls keep failing at once meanwhile), re-open on a failed
// probe, closed on a good one.
func TestBreakerScenario(t *testing.T) {
	clk := newFakeClock()
	b := NewBreaker(3, time.Second, clk.Now)
	var changes changeLog
	b.OnChange(changes.add)
	probes := make(chan chan error, 1) // each probe asks the test for its verdict
	b.SetProbe(func() error {
		verdict := make(chan error)
		probes <- verdict
		return <-verdict
	})
	probe := func(err error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		select {
		case v := <-probes:
			v <- err
		case <-ctx.Done():
			t.Fatal("no probe started")
		}
	}
	waitState := func(want int32) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for b.state.Load() != want {
			if ctx.Err() != nil {
				t.Fatalf("breaker never reached state %d", want)
			}
			runtime.Gosched()
		}
	}
	call := func(err error) error {
		t.Helper()
		if aerr := b.Allow(); aerr != nil {
			return aerr
		}
		b.ReportResult(err)
		return nil
	}

	if !b.Up() {
		t.Fatal("new breaker is not up")
	}
	// Two failures, a success (resets the streak), two failures: still closed.
	for _, err := range []error{errDown, errDown, nil, errDown, errDown} {
		if got := call(err); got != nil {
			t.Fatalf("closed breaker refused a call: %v", got)
		}
	}
	if !b.Up() {
		t.Fatal("breaker opened before 3 consecutive failures")
	}
	// Reply errors and cancellations are not failures; Nil resets the streak.
	for _, err := range []error{redis.Nil, context.Canceled, context.Canceled, context.Canceled} {
		_ = call(err)
	}
	if !b.Up() {
		t.Fatal("redis.Nil or a cancellation counted as a failure")
	}
	for range 3 {
		_ = call(errDown)
	}
	if b.Up() {
		t.Fatal("breaker still up after 3 consecutive failures")
	}
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("open breaker: Allow = %v, want ErrBreakerOpen", err)
	}
	clk.Advance(999 * time.Millisecond)
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("breaker half-opened before the cool period")
	}
	clk.Advance(time.Millisecond)
	// The cool period is over: the next call starts the probe and still fails at once.
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("call that started the probe: %v, want ErrBreakerOpen", err)
	}
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("half-open breaker let a call through beside the probe")
	}
	probe(errDown) // still down: open for a full period
	waitState(stateOpen)
	clk.Advance(500 * time.Millisecond)
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("re-opened breaker did not wait a full cool period")
	}
	select {
	case <-probes:
		t.Fatal("probe started before the cool period")
	default:
	}
	clk.Advance(500 * time.Millisecond)
	_ = b.Allow()
	probe(nil)
	waitState(stateClosed)
	if err := b.Allow(); err != nil {
		t.Fatalf("closed again but refused: %v", err)
	}
	if got := changes.String(); got != "[false true]" {
		t.Fatalf("OnChange calls = %v, want [false true]", got)
	}
}

// TestBreakerTrials: without a probe, the half-open breaker lets calls
// through as trials; the first failure re-opens it, the first success
// closes it, and the breaker's own refusal of a nested call is neutral.
func TestBreakerTrials(t *testing.T) {
	clk := newFakeClock()
	b := NewBreaker(1, time.Second, clk.Now)
	_ = b.Allow()
	b.ReportResult(errDown)
	if b.Up() {
		t.Fatal("threshold 1: still up")
	}
	clk.Advance(time.Second)
	if err := b.Allow(); err != nil {
		t.Fatal(err)
	}
	if err := b.Allow(); err != nil {
		t.Fatalf("nested call of a trial refused: %v", err)
	}
	b.ReportResult(ErrBreakerOpen) // neutral
	if b.Up() || b.state.Load() != stateHalfOpen {
		t.Fatal("ErrBreakerOpen changed the state")
	}
	b.ReportResult(errDown)
	if err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("failed trial did not re-open")
	}
	clk.Advance(time.Second)
	_ = b.Allow()
	b.ReportResult(nil)
	if !b.Up() {
		t.Fatal("good trial did not close")
	}
}

// TestIsFailure is the breaker's classification (SPEC 9): only failures of
// Redis itself count. The pool rows are the defect of issue 16: a burst larger
// than the pool reported its waits (ErrPoolTimeout, or the caller's deadline
// reached while waiting for a turn) and opened the breaker.
func TestIsFailure(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		// Redis answered.
		{"redis.Nil", redis.Nil, false},
		{"script error", redisErr("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"NOSCRIPT", redisErr("NOSCRIPT No matching script. Please use EVAL."), false},
		{"WRONGTYPE", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"MOVED", redisErr("MOVED 3999 127.0.0.1:6381"), false},
		// Nothing is known about Redis.
		{"breaker open", ErrBreakerOpen, false},
		{"caller canceled", context.Canceled, false},
		{"wrapped cancel", fmt.Errorf("x: %w", context.Canceled), false},
		{"deadline reached waiting for a pooled connection", context.DeadlineExceeded, false},
		{"wrapped deadline", fmt.Errorf("admit: %w", context.DeadlineExceeded), false},
		{"pool timeout", redis.ErrPoolTimeout, false},
		{"wrapped pool timeout", fmt.Errorf("admit: %w", redis.ErrPoolTimeout), false},
		{"pool exhausted", redis.ErrPoolExhausted, false},
		{"client closed", redis.ErrClosed, false},
		// Redis is unreachable or cannot serve.
		{"hung redis: socket timeout", readTimeout, true},
		{"socket deadline", os.ErrDeadlineExceeded, true},
		{"dial timeout wrapping the context's deadline", dialTimeout, true},
		{"dial refused", errDown, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"LOADING", redisErr("LOADING Redis is loading the dataset in memory"), true},
		{"BUSY", redisErr("BUSY Redis is busy running a script."), true},
		{"READONLY", redisErr("READONLY You can't write against a read only replica."), true},
		{"CLUSTERDOWN", redisErr("CLUSTERDOWN The cluster is down"), true},
		{"MASTERDOWN", redisErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"TRYAGAIN", redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"OOM", redisErr("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"max clients", redisErr("ERR max number of clients reached"), true},
	} {
		if got := IsFailure(tc.err); got != tc.want {
			t.Errorf("%s: IsFailure(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestPoolWaitsDoNotOpen: pool waits neither count nor reset a streak.
func TestPoolWaitsDoNotOpen(t *testing.T) {
	b := NewBreaker(3, time.Second, newFakeClock().Now)
	for range 100 {
		if err := b.Allow(); err != nil {
			t.Fatal(err)
		}
		b.ReportResult(redis.ErrPoolTimeout)
		b.ReportResult(context.DeadlineExceeded)
	}
	if !b.Up() {
		t.Fatal("pool waits opened the breaker")
	}
	b.ReportResult(errDown)
	b.ReportResult(errDown)
	b.ReportResult(redis.ErrPoolTimeout) // does not reset the streak
	b.ReportResult(errDown)
	if b.Up() {
		t.Fatal("a pool wait reset the failure streak")
	}
}

// redisErr is a reply error as go-redis returns it.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestBreakerConcurrent hammers the breaker from many goroutines (run with
// -race): it must end closed after successes and open after failures.
func TestBreakerConcurrent(t *testing.T) {
	clk := newFakeClock()
	b := NewBreaker(3, time.Second, clk.Now)
	var ups, downs sync.WaitGroup
	for range 32 {
		ups.Add(1)
		go func() {
			defer ups.Done()
			for range 1000 {
				if b.Allow() == nil {
					b.ReportResult(errDown)
				}
			}
		}()
	}
	ups.Wait()
	if b.Up() {
		t.Fatal("breaker up after only failures")
	}
	clk.Advance(time.Second)
	for range 32 {
		downs.Add(1)
		go func() {
			defer downs.Done()
			for range 1000 {
				if b.Allow() == nil {
					b.ReportResult(nil)
				}
			}
		}()
	}
	downs.Wait()
	if !b.Up() {
		t.Fatal("breaker down after a successful probe")
	}
}

func BenchmarkBreakerAllowClosed(b *testing.B) {
	br := NewBreaker(3, time.Second, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if br.Allow() == nil {
				br.ReportResult(nil)
			}
		}
	})
}
