package cluster

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
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
// Only failures that say Redis is unreachable or unhealthy count (IsFailure):
// a reply error (redis.Nil, a script error, WRONGTYPE...) proves Redis
// answered; a wait for a pooled connection, a caller's own cancellation or
// deadline and ErrBreakerOpen prove nothing either way.
// Allow in the closed state is one atomic load, so the breaker costs nothing
// while Redis is up.
type Breaker struct {
	// Immutable after construction.
	threshold int32
	cool      time.Duration
	clock     func() time.Time
	onFailure func() // nil, or called (outside mu) on each counted failure and failed probe; set before first use

	// Atomics, read on every call.
	state    atomic.Int32
	failures atomic.Int32 // consecutive failures while closed
	until    atomic.Int64 // open: UnixNano when the breaker half-opens
	trips    atomic.Int64 // times it went from closed to open

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

// Trips counts the breaker's openings from the closed state: a breaker that
// flaps trips often, one that stays open while Redis is down trips once.
func (b *Breaker) Trips() int64 { return b.trips.Load() }

// Available reports whether a call sent now would go to Redis: the question a
// caller asks to choose shared or local state before it builds the call. It
// never waits. Unlike Up it moves the breaker on: once the cool period is
// over it starts the probe (and answers false until the probe succeeds), so a
// caller that stops calling Redis while it is down still learns when it is
// back. Without a probe a half-open breaker answers true: the next call is
// the trial, and it reports its own outcome.
func (b *Breaker) Available() bool {
	if b.state.Load() == stateClosed {
		return true
	}
	return b.Allow() == nil
}

// Allow implements redis.Limiter. It returns nil when the call may go to
// Redis and ErrBreakerOpen otherwise. When it returns nil the caller must
// report the outcome with ReportResult.
func (b *Breaker) Allow() error {
	switch b.state.Load() {
	case stateClosed:
		return nil
	case stateOpen:
		if b.stillOpen() {
			return ErrBreakerOpen
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state.Load() != stateOpen || b.stillOpen() {
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

// stillOpen reports whether an open breaker's cool period lasts. An open
// period is never longer than cool: a deadline further away than that
// means the wall clock stepped back since the breaker opened (NTP, a
// resumed VM), and the period counts as over rather than lasting the size
// of the step (a node kept in local fallback for an hour after Redis came
// back). A summary breaker forced open (until MaxInt64) stays open.
func (b *Breaker) stillOpen() bool {
	until := b.until.Load()
	if until == math.MaxInt64 {
		return true
	}
	now := b.clock().UnixNano()
	return now < until && until-now <= int64(b.cool)
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
	if err != nil && b.onFailure != nil {
		b.onFailure()
	}
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
	if b.onFailure != nil {
		b.onFailure()
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
			b.trips.Add(1)
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

// set forces the state of a breaker that guards no calls of its own: the
// summary of a Cluster's shards (Conn.Breaker), up when every shard is.
func (b *Breaker) set(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch closed := b.state.Load() == stateClosed; {
	case up && !closed:
		b.closeLocked()
	case !up && closed:
		b.until.Store(math.MaxInt64) // never half-opens by itself
		b.state.Store(stateOpen)
		b.trips.Add(1)
		b.notifyLocked(false)
	}
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

// neutral errors say nothing about Redis's health, so they neither count
// nor reset the failure streak (SPEC 9: "never a wait for a pooled
// connection"):
//
//   - the breaker's own refusal (of a nested call, such as a new
//     connection's handshake);
//   - the caller's cancellation or deadline: a bare context error. A Redis
//     that hangs shows as a network timeout instead (*net.OpError "i/o
//     timeout"), because go-redis turns the deadline into a socket deadline;
//     a bare context.DeadlineExceeded comes from a wait for a pooled
//     connection that ran out of time, or from a caller already out of time;
//   - a wait for a pooled connection that ran out (ErrPoolTimeout,
//     ErrPoolExhausted): a burst larger than the pool, not a sick Redis. At
//     3,000 concurrent admissions these opened the breaker and the local
//     fallback over-admitted;
//   - a closed client (shutdown).
func neutral(err error) bool {
	if errors.Is(err, ErrBreakerOpen) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// A socket error may wrap a context error (a dial bounded by the
	// context): that one is Redis's. (context.DeadlineExceeded is itself a
	// net.Error, so the test names the socket's types.)
	var operr *net.OpError
	return !errors.As(err, &operr) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// IsFailure reports whether err says Redis is unreachable or unhealthy, the
// errors a breaker counts: network errors (refused, reset, EOF, a socket
// timeout of a hung Redis) and the replies of a server that cannot serve
// (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, READONLY, TRYAGAIN, OOM, max
// clients). Other reply errors (redis.Nil, script errors, WRONGTYPE,
// NOSCRIPT) prove Redis answered; the neutral errors (a pool wait, the
// caller's own cancellation or deadline, ErrBreakerOpen) prove nothing.
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
