package edge

// Budgets in the Redis edge state (SPEC 3.1): what a finished request still
// owes its shared budget, and the alert raised once per period.

import "switchyard/ratelimit"

// SetBudgetAlert implements State: the writer reports the crossings the
// finish script found (once for the cluster), the local fallback its own.
func (r *Redis) SetBudgetAlert(fn func(team string)) {
	r.alert.Store(&fn)
	r.local.SetBudgetAlert(fn)
}

// budgetAlert calls the alert hook, if any.
func (r *Redis) budgetAlert(team string) {
	if fn := r.alert.Load(); fn != nil {
		(*fn)(team)
	}
}

// budgetDelta is what a finished request still owes its shared budget: its
// real cost minus what its admission reserved, in the window the
// reservation was made in. Once that window has ended, the reservation
// covered the request and the new window owes nothing for it.
func budgetDelta(cost, reserved float64, window, now, code int64) float64 {
	if reserved <= 0 {
		return cost
	}
	if id, _ := ratelimit.PeriodWindow(now, code); id != window {
		return 0
	}
	return cost - reserved
}
