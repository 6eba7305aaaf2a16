package config

import (
	"errors"
	"fmt"
	"time"
)

// The calendar budget periods (SPEC 3.1), all in UTC.
const (
	PeriodDaily   = "daily"   // from 00:00
	PeriodWeekly  = "weekly"  // from Monday 00:00
	PeriodMonthly = "monthly" // from the 1st, 00:00
)

// DefaultAlertAt is budget.alert_at's default: the share of a budget whose
// crossing raises the one alert of a period.
const DefaultAlertAt = 0.8

// Period is a budget period: a UTC calendar period (daily, weekly, monthly)
// or a duration. In YAML and JSON it is one string: a calendar name or a Go
// duration ("720h").
type Period struct {
	Calendar string        // PeriodDaily, PeriodWeekly, PeriodMonthly; "" for a duration
	Every    time.Duration // the window's length when Calendar is ""
}

// ErrPeriod is the error of a period that is none of the allowed forms.
var ErrPeriod = errors.New("not daily, weekly, monthly or a positive duration such as 720h")

// ParsePeriod reads a period: a calendar name or a positive Go duration.
func ParsePeriod(s string) (Period, error) {
	switch s {
	case PeriodDaily, PeriodWeekly, PeriodMonthly:
		return Period{Calendar: s}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return Period{}, fmt.Errorf("%q is %w", s, ErrPeriod)
	}
	return Period{Every: d}, nil
}

// IsZero reports an unset period.
func (p Period) IsZero() bool { return p.Calendar == "" && p.Every == 0 }

// String is the period as the config writes it.
func (p Period) String() string {
	if p.Calendar != "" {
		return p.Calendar
	}
	return p.Every.String()
}

// MarshalText implements encoding.TextMarshaler.
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. The zero period
// ("0s", as a state without a budget stores it, or "") reads as unset.
func (p *Period) UnmarshalText(b []byte) error {
	if s := string(b); s == "" || s == "0s" {
		*p = Period{}
		return nil
	}
	v, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
