// Package fakeclock is the manually advanced clock the tests of every
// package share (CONVENTIONS 6: time is injected, tests never sleep).
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time source that moves only when told to. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// New returns a clock stopped at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
