package routing

import "time"

// Clock is the time source of the router (CONVENTIONS 6). Cooldowns, probes,
// the latency EWMA and the warm-cache TTL all read it, so a test drives them
// by advancing internal/fakeclock instead of sleeping.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now(), monotonic reading included.
func (SystemClock) Now() time.Time { return time.Now() }

var _ Clock = SystemClock{}
