package ratelimit

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

// TestGCRA checks the arithmetic the local limiter shares with the scripts.
func TestGCRA(t *testing.T) {
	now := 1_000 * sec
	for _, tc := range []struct {
		name             string
		tat, limit, cost int64
		wantNext         int64
		wantWait         time.Duration
	}{
		{"empty bucket starts at now", 0, 60, 1, now + sec, 0},
		{"past TAT counts as now", now - 5*sec, 60, 1, now + sec, 0},
		{"the whole minute fits", now, 60, 60, now + 60*sec, 0},
		{"one more waits one interval", now + 60*sec, 60, 1, now + 61*sec, time.Second},
		{"cost scales the interval", now, 1000, 500, now + 30*sec, 0},
		{"over by 100 tokens at tpm 1000", now + 54*sec, 1000, 200, now + 66*sec, 6 * time.Second},
		{"a cost equal to the limit fits", now, 7, 7, now + 60*sec, 0},
	} {
		next, wait := gcraCharge(tc.tat, now, tc.limit, tc.cost)
		if abs(time.Duration(next-tc.wantNext)) > time.Microsecond || wait != tc.wantWait {
			t.Errorf("%s: next %v wait %v, want %v %v", tc.name, time.Duration(next-now), wait, time.Duration(tc.wantNext-now), tc.wantWait)
		}
	}
	for _, tc := range []struct {
		name             string
		tat, limit, delt int64
		want             int64
	}{
		{"charge from a full bucket", 0, 1000, 100, now + 6*sec},
		{"charge adds to the debt", now + 10*sec, 1000, 100, now + 16*sec},
		{"refund within the debt", now + 30*sec, 1000, -250, now + 15*sec},
		{"refund beyond the debt stops at now", now + 10*sec, 1000, -1000, now},
		{"refund into a full bucket is a no-op", now - 10*sec, 1000, -1000, now},
	} {
		if got := gcraAdjust(tc.tat, now, tc.limit, tc.delt); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, time.Duration(got-now), time.Duration(tc.want-now))
		}
	}
	for _, tc := range []struct {
		tat, limit int64
		rem        int64
		reset      time.Duration
	}{
		{now - sec, 60, 60, 0},
		{now + 30*sec, 60, 30, 30 * time.Second},
		{now + 60*sec, 60, 0, time.Minute},
		{now + 90*sec, 60, 0, 90 * time.Second}, // in debt
		{now + 59*sec + 999_999_500, 60, 0, 59*time.Second + 999_999_500},
	} {
		rem, reset := gcraState(tc.tat, now, tc.limit)
		if rem != tc.rem || reset != tc.reset {
			t.Errorf("state(tat=now%+v): %d %v, want %d %v", time.Duration(tc.tat-now), rem, reset, tc.rem, tc.reset)
		}
	}
	// a duration's window opens with a spend: none open, one open, one ended
	if idx, end := PeriodWindow(now, 3600, 0); idx != now || end != now+int64(time.Hour) {
		t.Errorf("a new window: %d %v", idx, end)
	}
	if idx, end := PeriodWindow(now, 3600, now-int64(time.Minute)); idx != now-int64(time.Minute) || end != now+int64(59*time.Minute) {
		t.Errorf("an open window: %d %v", idx, end)
	}
	if idx, _ := PeriodWindow(now, 3600, now-int64(time.Hour)); idx != now {
		t.Errorf("an ended window: %d", idx)
	}
}
