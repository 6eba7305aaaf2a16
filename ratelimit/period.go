package ratelimit

import (
	"time"

	"switchyard/config"
)

// The codes of the calendar periods that are not a fixed number of
// seconds from the Unix epoch, as PeriodCode gives them to the admission
// scripts (daily is: 86,400 s windows start at 00:00 UTC).
const (
	codeWeekly  int64 = -1 // from Monday 00:00 UTC
	codeMonthly int64 = -2 // from the 1st, 00:00 UTC
	codeDaily   int64 = -3 // from 00:00 UTC
)

// day is 24 hours in nanoseconds; mondayOffset is where weeks start: the
// Unix epoch was a Thursday, 1970-01-05 the first Monday.
const (
	day          = int64(24 * time.Hour)
	mondayOffset = 4 * day
)

// BudgetPeriod is a budget's period (default 720h, SPEC 13).
func BudgetPeriod(b config.Budget) config.Period {
	if b.Period.IsZero() {
		return config.DefaultBudgetPeriod
	}
	return b.Period
}

// BudgetAlertUSD is the spend whose crossing raises the team's budget alert
// of a period (budget.usd x budget.alert_at, default 0.8); 0 without a
// budget.
func BudgetAlertUSD(b config.Budget) float64 {
	if b.USD <= 0 {
		return 0
	}
	a := b.AlertAt
	if a <= 0 || a > 1 {
		a = config.DefaultAlertAt
	}
	return b.USD * a
}

// PeriodCode is a budget period as the scripts and PeriodWindow take it:
// codeDaily, codeWeekly or codeMonthly for a calendar period, or a
// duration's seconds (> 0), a window that opens with the level's first
// spend.
func PeriodCode(p config.Period) int64 {
	switch p.Calendar {
	case config.PeriodDaily:
		return codeDaily
	case config.PeriodWeekly:
		return codeWeekly
	case config.PeriodMonthly:
		return codeMonthly
	}
	return max(1, int64(p.Every/time.Second))
}

// Rolling reports whether code is a duration's: its windows open with a
// spend, not on the calendar.
func Rolling(code int64) bool { return code > 0 }

// PeriodWindow is the budget window holding now (ns since the epoch, UTC)
// for the period code: an id that differs between windows, and when the
// window ends (ns). For a duration, start is the id of the window the
// level's last spend opened (0: none): while it lasts it is the window;
// after it, the window is the one a spend now would open, with id now.
// The admission scripts compute the same on Redis's clock (periodLua in
// edge); TestWindowParity holds them equal.
func PeriodWindow(now, code, start int64) (id, end int64) {
	switch code {
	case codeDaily:
		id = floorDiv(now, day)
		return id, (id + 1) * day
	case codeWeekly:
		w := 7 * day
		id = floorDiv(now-mondayOffset, w)
		return id, (id+1)*w + mondayOffset
	case codeMonthly:
		t := time.Unix(0, now).UTC()
		y, m, _ := t.Date()
		return int64(y)*12 + int64(m) - 1, time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	}
	p := code * int64(time.Second)
	if start > 0 && now >= start && now < start+p {
		return start, start + p
	}
	return now, now + p
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
