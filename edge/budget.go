package edge

// Budgets in the Redis edge state (SPEC 3.1): what a finished request still
// owes its shared budget, and the alert raised once per period.

import (
	"time"

	"switchyard/ratelimit"
)

// SetBudgetAlert implements State: the writer reports the crossings the
// finish script found (once for the cluster), the local fallback its own.
func (r *Redis) SetBudgetAlert(fn BudgetAlert) {
	r.alert.Store(&fn)
	r.local.SetBudgetAlert(localAlert(fn))
}

// budgetAlert calls the alert hook, if any.
func (r *Redis) budgetAlert(team string, level LevelKind, name string) {
	if fn := r.alert.Load(); fn != nil {
		(*fn)(team, level, name)
	}
}

// BudgetAlert is called once per level and budget period when the level's
// spend crosses its budget.alert_at (SPEC 3.1): team names the team, name
// the key or end user of a key or user level.
type BudgetAlert func(team string, level LevelKind, name string)

// localAlert adapts fn to the local limiter's hook.
func localAlert(fn BudgetAlert) func(string, int, string) {
	return func(team string, level int, name string) { fn(team, LevelKind(level), name) }
}

// budgetDelta is what a finished request still owes its shared budget: its
// real cost minus what its admission reserved, in the window the
// reservation was made in; and settled, the reservation it takes out of
// the budget hash's outstanding ones (field r, beginLua). Once that window
// has ended, the reservation covered the request: the new window owes
// nothing for it and its r moved on with it.
//
// window is the script's id (a duration's: the µs its window opened), now
// this node's clock (ns): near a window's end the two clocks may disagree
// by their skew, as they would on any boundary.
func budgetDelta(cost, reserved float64, window, now, code int64) (delta, settled float64) {
	if reserved <= 0 {
		return cost, 0
	}
	if !inScriptWindow(now, code, window) {
		return 0, 0
	}
	return cost - reserved, reserved
}

// inScriptWindow reports whether now (ns) falls in the budget window the
// scripts name by id: a rolling window by the µs it opened at on Redis's
// clock (0: none open; only its end is checked, so a node clock a little
// behind Redis's does not leave it), a calendar one by PeriodWindow's
// number.
func inScriptWindow(now, code, id int64) bool {
	if ratelimit.Rolling(code) {
		return id > 0 && now < id*1000+code*int64(time.Second)
	}
	idx, _ := ratelimit.PeriodWindow(now, code, 0)
	return idx == id
}
