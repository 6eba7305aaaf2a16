package cluster

import (
	"testing"
	"time"
)

// A breaker's open period is a deadline on the wall clock. When the clock
// steps back (NTP, a VM resumed) while it is open, the period must still
// end one cool period after it opened on the breaker's own reckoning, not
// the size of the step later: otherwise a node stays in local fallback
// (divided limits, node-local pins) for an hour after Redis is back
// because its clock was corrected by an hour.
func TestHostile4BreakerOpenSurvivesClockStepBack(t *testing.T) {
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		clk := newFakeClock()
		b := NewBreaker(3, time.Second, clk.Now) // no probe: calls are trials once half-open
		for range 3 {
			if err := b.Allow(); err != nil {
				t.Fatal(err)
			}
			b.ReportResult(errDown)
		}
		if b.Allow() != ErrBreakerOpen {
			t.Fatal("breaker not open after the threshold")
		}
		clk.Advance(-step) // the wall clock is corrected backwards
		clk.Advance(2 * time.Second)
		if err := b.Allow(); err != nil {
			t.Fatalf("step back %v: a cool period after opening, Allow = %v, want a trial call", step, err)
		}
	}
	// the summary breaker of a Cluster never half-opens by itself
	clk := newFakeClock()
	s := NewBreaker(3, time.Second, clk.Now)
	s.set(false)
	clk.Advance(-time.Hour)
	if s.Allow() != ErrBreakerOpen {
		t.Fatal("a forced-open summary breaker half-opened after a clock step")
	}
}

// The slot-map reload is rate-limited on the wall clock: after the clock
// steps back, reloads must still be asked for once per ReloadEvery, or a
// lost shard's keys stay local until the clock catches up (the promoted
// replica is never learned).
func TestHostile4ReloadSurvivesClockStepBack(t *testing.T) {
	s, reloads, advance := newTestShards(t)
	s.reloadSoon()
	if reloads.Load() != 1 {
		t.Fatalf("reloads = %d, want 1", reloads.Load())
	}
	advance(-time.Hour)
	s.reloadSoon()
	advance(ReloadEvery)
	s.reloadSoon()
	if got := reloads.Load(); got < 2 {
		t.Fatalf("after a clock step back, reloads = %d, want them asked again", got)
	}
}
