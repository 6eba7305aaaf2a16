package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBreakerOpen is returned, at once and without touching the network, by
// every Redis call made while the breaker is open (SPEC 9: "once a breaker
// opens, not at all"). Callers treat it like any other Redis failure and fall
// back to local state.
var ErrBreakerOpen = errors.New("cluster: redis circuit breaker open")

// Breaker defaults.
const (
	DefaultThreshold = 3           // consecutive failures that open the breaker
	DefaultCool      = time.Second // open period before one probe is let through
)

// Breaker states.
const (
	stateClosed   int32 = iota // Redis is up: every call goes through
	stateOpen                  // Redis is down: calls fail at once until `until`
	stateHalfOpen              // cool period over: the probe runs (calls fail at once), or calls are trials
)

// Breaker is a circuit breaker in the shape of go-redis's Limiter hook
// (Allow before a connection is used, ReportResult after). It opens after
// Threshold consecutive failures and then fails every call at once. After
// the cool period it half-opens:
//
//   - with a probe (SetProbe; NewClient installs one that sends PING on a
//     connection of its own), the next Allow starts that one probe in the
//     background and still fails at once, so no request ever waits on a
//     Redis that may still be down; the probe's success closes the breaker,
//     its failure opens it for another cool period;
//   - without a probe, calls are let through as trials: the first reported
//     success closes it, the first failure opens it again. (A single in-band
//     probe does not work with the Limiter hook: go-redis asks Allow again
//     for the handshake of a new connection, which the probe would refuse.)
//
// Only failures that say Redis is unreachable or unhealthy count: a reply
// error (redis.Nil, a script error, WRONGTYPE...) proves Redis answered; a
// caller's own cancellation and ErrBreakerOpen prove nothing either way.
// Allow in the closed state is one atomic load, so the breaker costs nothing
// while Redis is up.
type Breaker struct {
	// Immutable after construction.
	threshold int32
	cool      time.Duration
	clock     func() time.Time

	// Atomics, read on every call.
	state    atomic.Int32
	failures atomic.Int32 // consecutive failures while closed
	until    atomic.Int64 // open: UnixNano when the breaker half-opens

	// mu serialises state transitions and the OnChange callback, so the
	// callback sees up/down in the order they happened.
	mu       sync.Mutex
	onChange func(up bool) // guarded by mu
	probe    func() error  // guarded by mu
}

// NewBreaker returns a closed breaker. threshold <= 0 means DefaultThreshold,
// cool <= 0 means DefaultCool, a nil clock means time.Now.
func NewBreaker(threshold int, cool time.Duration, clock func() time.Time) *Breaker {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	if cool <= 0 {
		cool = DefaultCool
	}
	if clock == nil {
		clock = time.Now
	}
	return &Breaker{threshold: int32(threshold), cool: cool, clock: clock}
}

// OnChange sets the function called on every transition between up and down
// (the gateway sets switchyard_redis_up from it). fn runs under the breaker's
// transition lock: it must be quick and must not call back into the breaker.
func (b *Breaker) OnChange(fn func(up bool)) {
	b.mu.Lock()
	b.onChange = fn
	b.mu.Unlock()
}

// SetProbe installs the half-open probe: a bounded check that Redis answers
// (nil when it does), run in its own goroutine and never through the
// guarded client.
func (b *Breaker) SetProbe(fn func() error) {
	b.mu.Lock()
	b.probe = fn
	b.mu.Unlock()
}

// Up reports whether the breaker is closed (Redis is believed reachable).
// A half-open breaker is not up: its probe has not succeeded yet.
func (b *Breaker) Up() bool { return b.state.Load() == stateClosed }

// Allow implements redis.Limiter. It returns nil when the call may go to
// Redis and ErrBreakerOpen otherwise. When it returns nil the caller must
// report the outcome with ReportResult.
func (b *Breaker) Allow() error {
	switch b.state.Load() {
	case stateClosed:
		return nil
	case stateOpen:
		if b.clock().UnixNano() < b.until.Load() {
			return ErrBreakerOpen
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state.Load() != stateOpen || b.clock().UnixNano() < b.until.Load() {
			return b.halfOpenAllowLocked() // another caller half-opened it
		}
		b.state.Store(stateHalfOpen)
		if b.probe != nil {
			go b.runProbe(b.probe)
			return ErrBreakerOpen
		}
		return nil
	default: // half-open
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.halfOpenAllowLocked()
	}
}

// halfOpenAllowLocked: with a probe running, calls wait for its verdict
// (failing at once); without one, calls are trials.
func (b *Breaker) halfOpenAllowLocked() error {
	switch {
	case b.state.Load() == stateClosed:
		return nil
	case b.state.Load() == stateHalfOpen && b.probe == nil:
		return nil
	}
	return ErrBreakerOpen
}

func (b *Breaker) runProbe(probe func() error) {
	err := probe()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != stateHalfOpen {
		return // a late success of an earlier call closed it meanwhile
	}
	if err != nil {
		b.openLocked()
		return
	}
	b.closeLocked()
}

// ReportResult implements redis.Limiter: it records the outcome of a call
// that Allow let through.
func (b *Breaker) ReportResult(err error) {
	if neutral(err) {
		return
	}
	if !IsFailure(err) {
		if b.state.Load() == stateClosed {
			if b.failures.Load() != 0 {
				b.failures.Store(0)
			}
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state.Load() != stateClosed {
			b.closeLocked() // Redis answered
		}
		return
	}
	switch b.state.Load() {
	case stateClosed:
		if b.failures.Add(1) < b.threshold {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state.Load() == stateClosed {
			b.openLocked()
			b.notifyLocked(false)
		}
	case stateHalfOpen:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state.Load() == stateHalfOpen && b.probe == nil {
			b.openLocked() // a failed trial; still down, no notification
		}
	}
	// Open: late failures of calls allowed before it opened change nothing.
}

func (b *Breaker) openLocked() {
	b.until.Store(b.clock().Add(b.cool).UnixNano())
	b.state.Store(stateOpen)
}

func (b *Breaker) closeLocked() {
	b.failures.Store(0)
	b.state.Store(stateClosed)
	b.notifyLocked(true)
}

func (b *Breaker) notifyLocked(up bool) {
	if b.onChange != nil {
		b.onChange(up)
	}
}

// neutral errors say nothing about Redis: the breaker's own refusal (of a
// nested call, such as a new connection's handshake) and the caller's
// cancellation.
func neutral(err error) bool {
	return errors.Is(err, ErrBreakerOpen) || errors.Is(err, context.Canceled)
}

// IsFailure reports whether err says Redis is unreachable or unhealthy, the
// errors a breaker counts. Reply errors (redis.Nil, script errors, WRONGTYPE,
// NOSCRIPT) mean Redis answered and are not failures, except the replies of a
// server that cannot serve (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN,
// READONLY, TRYAGAIN, OOM, max clients). A caller's own cancellation is not a failure either;
// a deadline is (a hung Redis shows as one).
func IsFailure(err error) bool {
	if err == nil || neutral(err) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range unhealthyReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

var unhealthyReplies = [...]string{"LOADING", "BUSY ", "MASTERDOWN", "CLUSTERDOWN", "READONLY", "TRYAGAIN", "OOM ",
	"ERR max number of clients"}

// hook applies a Breaker to a client whose options have no Limiter field
// (the Sentinel failover client): the same Allow/ReportResult around every
// command and pipeline.
type hook struct{ b *Breaker }

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.b.Allow(); err != nil {
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		h.b.ReportResult(err)
		return err
	}
}

func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := h.b.Allow(); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		err := next(ctx, cmds)
		h.b.ReportResult(err)
		return err
	}
}

// Compile-time guards.
var (
	_ redis.Limiter = (*Breaker)(nil)
	_ redis.Hook    = hook{}
)
