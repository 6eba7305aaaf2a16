package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// DeploymentUsage counts what each deployment served over the last minute:
// the input of deployment quotas (a deployment's own rpm/tpm, SPEC 1) and of
// the usage strategy. Usage is read on the selection path and never waits on
// I/O.
type DeploymentUsage interface {
	// Record counts one request of tokens on deployment depID.
	Record(depID string, tokens int64)
	// Usage returns the requests and tokens of depID over the last minute.
	Usage(depID string) (rpm, tpm int64)
}

// usageSlots is the resolution of the local sliding minute: one-second slots.
const usageSlots = 60

// LocalUsage is the node-local DeploymentUsage: a sliding minute of
// one-second slots per deployment on an injected clock. Record takes the
// deployment's mutex; Usage only loads atomics, so the selection path takes
// no lock (a read racing a slot's reset may miss that one slot's counts).
type LocalUsage struct {
	clock func() time.Time // immutable
	deps  sync.Map         // deployment id -> *usageWindow
}

// usageWindow is one deployment's sliding minute.
type usageWindow struct {
	mu    sync.Mutex // serialises writers
	slots [usageSlots]usageSlot
}

type usageSlot struct {
	sec      atomic.Int64 // Unix second the counts belong to
	req, tok atomic.Int64
}

// NewLocalUsage returns an empty LocalUsage on clock (nil: time.Now).
func NewLocalUsage(clock func() time.Time) *LocalUsage {
	if clock == nil {
		clock = time.Now
	}
	return &LocalUsage{clock: clock}
}

func (u *LocalUsage) window(id string) *usageWindow {
	if v, ok := u.deps.Load(id); ok {
		return v.(*usageWindow)
	}
	v, _ := u.deps.LoadOrStore(id, &usageWindow{})
	return v.(*usageWindow)
}

// Record implements DeploymentUsage.
func (u *LocalUsage) Record(depID string, tokens int64) {
	u.add(depID, 1, tokens)
}

func (u *LocalUsage) add(depID string, req, tokens int64) {
	sec := u.clock().Unix()
	w := u.window(depID)
	s := &w.slots[sec%usageSlots]
	w.mu.Lock()
	if s.sec.Load() != sec {
		s.req.Store(0)
		s.tok.Store(0)
		s.sec.Store(sec)
	}
	s.req.Add(req)
	s.tok.Add(tokens)
	w.mu.Unlock()
}

// Usage implements DeploymentUsage: the counts of the 60 one-second slots
// ending now.
func (u *LocalUsage) Usage(depID string) (rpm, tpm int64) {
	v, ok := u.deps.Load(depID)
	if !ok {
		return 0, 0
	}
	w := v.(*usageWindow)
	now := u.clock().Unix()
	for i := range w.slots {
		s := &w.slots[i]
		if sec := s.sec.Load(); sec <= now && now-sec < usageSlots {
			rpm += s.req.Load()
			tpm += s.tok.Load()
		}
	}
	return rpm, tpm
}

var (
	_ DeploymentUsage = (*LocalUsage)(nil)
	_ DeploymentUsage = (*RedisUsage)(nil)
)
