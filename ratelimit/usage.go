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
	// Record counts one request of tokens on deployment depID and returns
	// where it was counted, for Unrecord.
	Record(depID string, tokens int64) (stamp int64)
	// Unrecord takes back a request Record counted (stamp: what it
	// returned), unless the count already left the window.
	Unrecord(depID string, tokens, stamp int64)
	// Usage returns the requests and tokens of depID over the last minute.
	Usage(depID string) (rpm, tpm int64)
	// Room returns how long until one more request of est tokens fits rpm
	// and tpm (0: no limit) as the window moves on; 0 when it fits now.
	Room(depID string, rpm, tpm, est int64) time.Duration
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

// Record implements DeploymentUsage: the stamp is the Unix second the
// request was counted in.
func (u *LocalUsage) Record(depID string, tokens int64) int64 {
	sec := u.clock().Unix()
	u.add(depID, sec, 1, tokens)
	return sec
}

// Unrecord implements DeploymentUsage: the counts come off the slot of the
// second they were added to, if that slot still holds that second (a count
// older than the window has left it already).
func (u *LocalUsage) Unrecord(depID string, tokens, stamp int64) {
	v, ok := u.deps.Load(depID)
	if !ok {
		return
	}
	w := v.(*usageWindow)
	s := &w.slots[stamp%usageSlots]
	w.mu.Lock()
	if s.sec.Load() == stamp && s.req.Load() > 0 {
		s.req.Add(-1)
		s.tok.Add(-min(tokens, s.tok.Load()))
	}
	w.mu.Unlock()
}

func (u *LocalUsage) add(depID string, sec, req, tokens int64) {
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

// Room implements DeploymentUsage: the wait until enough of the oldest
// counted seconds leave the window (a second's counts leave it 60 s after
// it began) for one more request of est tokens to fit, by the rule of the
// router's quota check (routing.overQuota): requests+1 <= rpm, and
// tokens+est <= tpm unless no tokens are counted.
func (u *LocalUsage) Room(depID string, rpm, tpm, est int64) time.Duration {
	return u.room(depID, rpm, tpm, est, 1)
}

// room is Room on the counts multiplied by scale (RedisUsage's local
// estimate of a cluster of scale nodes).
func (u *LocalUsage) room(depID string, rpm, tpm, est, scale int64) time.Duration {
	v, ok := u.deps.Load(depID)
	if !ok {
		return 0
	}
	w := v.(*usageWindow)
	now := u.clock()
	sec := now.Unix()
	fits := func(req, tok int64) bool {
		return (rpm <= 0 || req*scale+1 <= rpm) && (tpm <= 0 || tok*scale <= max(tpm-est, 0))
	}
	var req, tok int64
	for k := int64(usageSlots - 1); k >= 0; k-- {
		s := &w.slots[(sec-k)%usageSlots]
		if s.sec.Load() == sec-k {
			req += s.req.Load()
			tok += s.tok.Load()
		}
	}
	if fits(req, tok) {
		return 0
	}
	for k := int64(usageSlots - 1); k >= 0; k-- { // oldest second first
		s := &w.slots[(sec-k)%usageSlots]
		if s.sec.Load() != sec-k {
			continue
		}
		req -= s.req.Load()
		tok -= s.tok.Load()
		if fits(req, tok) {
			return time.Unix(sec-k+usageSlots, 0).Sub(now)
		}
	}
	return time.Unix(sec+1, 0).Sub(now) // counts raced in: look again next second
}

var (
	_ DeploymentUsage = (*LocalUsage)(nil)
	_ DeploymentUsage = (*RedisUsage)(nil)
)
