package routing

import (
	"sync"
	"time"
)

// Clock is the time source of the router (CONVENTIONS 6). Cooldowns, probes,
// the latency EWMA and the warm-cache TTL all read it, so a test drives them
// by advancing a FakeClock instead of sleeping.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now(), monotonic reading included.
func (SystemClock) Now() time.Time { return time.Now() }

// FakeClock is a Clock that moves only when told to. Safe for concurrent use.
type FakeClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// NewFakeClock returns a clock stopped at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{t: t} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var (
	_ Clock = SystemClock{}
	_ Clock = (*FakeClock)(nil)
)
