package gateway

import (
	"net/http"
	"testing"
	"time"
)

// TestShouldRetryBudgetNearReset: SPEC 3.1 sends x-should-retry: false on
// budget_exceeded only when Retry-After, the wait until the period
// resets, is over 60 s: a daily budget refused at 23:59:30 is worth the
// SDK's retry 30 s later (it said false on every budget_exceeded).
func TestShouldRetryBudgetNearReset(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		after time.Duration
		not   bool
	}{
		{"budget_exceeded", 30 * time.Second, false},
		{"budget_exceeded", time.Minute, false},
		{"budget_exceeded", time.Minute + time.Second, true},
		{"budget_exceeded", 6 * time.Hour, true},
		{"rate_limit_exceeded", 2 * time.Second, false},
		{"rate_limit_exceeded", 2 * time.Minute, true},
	} {
		e := &apiError{Status: http.StatusTooManyRequests, Type: tc.typ, RetryAfter: tc.after}
		if got := e.shouldNotRetry(); got != tc.not {
			t.Errorf("%s after %v: should-not-retry %v, want %v", tc.typ, tc.after, got, tc.not)
		}
	}
}
