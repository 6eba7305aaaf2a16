// Package routing is Switchyard's pure decision logic (SPEC 5-8): the
// selection strategies and the adaptive selector, per-node deployment health
// and cooldowns, the attempt planner with its shared retry budget and fallback
// chains by reason, and session keeping. The smart tier classifier (SPEC 4)
// lives in the subpackage tier. Time and randomness are injected (Clock, a
// seed); metrics leave through the Observer interface and cluster-wide usage
// comes in through UsageSource. It imports config and catalog only: never
// gin, redis or prometheus, and it does no I/O.
package routing

import "time"

// Class is the one classification of an upstream outcome (SPEC 7.4).
type Class uint8

// The classes of SPEC 7.4, plus Canceled for a client that went away (which
// never counts against a deployment).
const (
	ClassOK Class = iota
	ClassRateLimited
	ClassAuth
	ClassNotFound
	ClassServerError
	ClassTimeout
	ClassNetwork
	ClassContextWindow
	ClassContentPolicy
	ClassBadRequest
	ClassCanceled
	NumClasses
)

var classNames = [...]string{"ok", "rate_limited", "auth", "not_found", "server_error", "timeout", "network", "context_window", "content_policy", "bad_request", "canceled"}

// String returns the class's name as SPEC 7.4 spells it.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// MarshalText lets a Class appear by name in JSON (audit, admin health).
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Retryable reports whether another deployment (or another pass) may be
// tried after this outcome (SPEC 7.1): 429, 5xx, timeouts, connection errors.
func (c Class) Retryable() bool {
	switch c {
	case ClassRateLimited, ClassServerError, ClassTimeout, ClassNetwork:
		return true
	}
	return false
}

// Outcome is what one upstream attempt reports back through its done call.
type Outcome struct {
	Status     int           // HTTP status from the upstream, 0 when none arrived
	Class      Class         // classification
	Latency    time.Duration // whole attempt (sync) or until the stream ended
	TTFB       time.Duration // time to first byte; the latency sample for streams
	RetryAfter time.Duration // upstream's Retry-After, 0 when absent
	Message    string        // upstream error message, for the timeline
}
