package routing

import (
	"sync"
	"time"
)

// UsageSource counts each deployment's requests and tokens over the last
// minute, for its own RPM/TPM quota and for the `usage` strategy (SPEC 1,
// 5). The router records a request, with its estimated tokens (prompt plus
// expected output, as providers count them against their own limits), when
// it hands out an attempt on a deployment that has a quota, and only asks
// about such deployments. LocalUsage counts on this node; the cluster
// implementation (ratelimit.RedisUsage has this method set) counts
// cluster-wide behind the same interface. Usage is called on the selection
// path: implementations must be safe for concurrent use and never wait on I/O.
type UsageSource interface {
	// Record counts one request of tokens on the deployment.
	Record(deployment string, tokens int64)
	// Usage returns the deployment's requests and tokens over the last minute.
	Usage(deployment string) (requests, tokens int64)
}

// LocalUsage is a node-local UsageSource: a sliding one-minute window per
// deployment, approximated from two fixed minute buckets (the previous one
// weighted by the part of it still inside the window).
type LocalUsage struct {
	clock Clock    // immutable
	m     sync.Map // deployment id -> *usageWindow
}

// NewLocalUsage returns an empty node-local usage counter on the system clock.
func NewLocalUsage() *LocalUsage { return NewLocalUsageOn(SystemClock{}) }

// NewLocalUsageOn returns an empty node-local usage counter on clock.
func NewLocalUsageOn(clock Clock) *LocalUsage { return &LocalUsage{clock: clock} }

type usageWindow struct {
	mu sync.Mutex
	// Guarded by mu.
	minute           int64 // unix minute that cur counts
	curReq, curTok   int64
	prevReq, prevTok int64
}

// Record implements UsageSource.
func (l *LocalUsage) Record(deployment string, tokens int64) {
	v, ok := l.m.Load(deployment)
	if !ok {
		v, _ = l.m.LoadOrStore(deployment, &usageWindow{})
	}
	w := v.(*usageWindow)
	now := l.clock.Now()
	w.mu.Lock()
	w.rotateLocked(now)
	w.curReq++
	w.curTok += tokens
	w.mu.Unlock()
}

// Usage implements UsageSource.
func (l *LocalUsage) Usage(deployment string) (requests, tokens int64) {
	v, ok := l.m.Load(deployment)
	if !ok {
		return 0, 0
	}
	w := v.(*usageWindow)
	now := l.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotateLocked(now)
	frac := 1 - float64(now.UnixNano()%int64(time.Minute))/float64(time.Minute)
	return w.curReq + int64(float64(w.prevReq)*frac), w.curTok + int64(float64(w.prevTok)*frac)
}

func (w *usageWindow) rotateLocked(now time.Time) {
	m := now.Unix() / 60
	switch {
	case m == w.minute:
		return
	case m == w.minute+1:
		w.prevReq, w.prevTok = w.curReq, w.curTok
	default:
		w.prevReq, w.prevTok = 0, 0
	}
	w.curReq, w.curTok = 0, 0
	w.minute = m
}

// overQuota reports whether one more request of est tokens would exceed the
// deployment's RPM or TPM, given what it used. A request larger than the
// whole TPM is still let through when the minute is otherwise empty, or it
// could never be served.
func overQuota(rpm, tpm, requests, tokens, est int64) bool {
	if rpm > 0 && requests+1 > rpm {
		return true
	}
	return tpm > 0 && tokens > 0 && tokens+est > tpm
}

// untilNextMinute is how long until the current minute ends: the wait
// reported when only quotas stand in the way.
func untilNextMinute(now time.Time) time.Duration {
	return time.Minute - time.Duration(now.UnixNano()%int64(time.Minute))
}

var _ UsageSource = (*LocalUsage)(nil)
