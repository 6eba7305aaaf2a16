package ratelimit

import (
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// TeamUsage is a team's live state against its limits (SPEC 11 GET
// /admin/teams/{name}/usage): what the limiter's window holds now.
type TeamUsage struct {
	RPMUsed  int64     // requests the rpm window holds (capacity returns continuously)
	TPMUsed  int64     // tokens the tpm window holds
	InFlight int64     // max_parallel slots held
	SpentUSD float64   // budget spent in the current period
	ResetsAt time.Time // end of the current budget period (zero without a budget)
	// Alerted is set once the period's spend crossed budget.alert_at (SPEC
	// 3.1: the console marks the level).
	Alerted bool
}

// UsedFromTAT is how much of a GCRA window of limit per Window a TAT at
// tat holds at now (both ns): limit minus what could still be admitted.
func UsedFromTAT(tat, now, limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	rem, _ := gcraState(tat, now, limit)
	return limit - rem
}

// BudgetWindow is the id of the budget window of period code containing
// now (ns; PeriodWindow, start the window a duration's last spend opened)
// and the moment it ends: zero for a duration with no window open.
func BudgetWindow(now, code, start int64) (idx int64, resetsAt time.Time) {
	idx, end := PeriodWindow(now, code, start)
	if Rolling(code) && idx != start {
		return idx, time.Time{}
	}
	return idx, time.Unix(0, end)
}

// Usage reads the team's state in this limiter (with the limits it applies:
// the whole limits in a node without Redis, a share while Redis is away).
func (l *Local) Usage(t *catalog.Team) TeamUsage {
	tl := t.Team.Level()
	return l.usage(l.team(t.Name), &tl)
}

// LevelUsage is Usage for a key or user level.
func (l *Local) LevelUsage(lv Level) TeamUsage {
	if !lv.Limits.Any() {
		return TeamUsage{}
	}
	st, ok := l.subs.Load(lv.Key)
	if !ok { // at rest: its spend only, if any
		st = &localTeam{}
		if rec, ok := l.rest.peek(lv.Key); ok {
			st.code, st.period, st.spent = rec.code, rec.period, rec.spent
		}
	}
	return l.usage(st, lv.Limits)
}

func (l *Local) usage(st *localTeam, c *config.Limits) TeamUsage {
	lim := l.scaled(c)
	st.mu.Lock()
	defer st.mu.Unlock()
	wall := l.clock().UnixNano()
	now := l.steady(wall) // TATs and slots; budgets are on wall
	st.purgeLocked(now)
	u := TeamUsage{
		RPMUsed:  UsedFromTAT(st.rpmTAT, now, lim.rpm),
		TPMUsed:  UsedFromTAT(st.tpmTAT, now, lim.tpm),
		InFlight: int64(len(st.slots)),
	}
	if lim.budget > 0 {
		idx, resets := BudgetWindow(wall, lim.period, st.startFor(lim.period))
		u.ResetsAt = resets
		if st.code == lim.period && st.period == idx {
			u.SpentUSD = st.spent
			u.Alerted = st.alerted == st.period+1
		}
	}
	return u
}
