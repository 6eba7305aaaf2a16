package cache

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestPurgesByScopeAndTime(t *testing.T) {
	var p Purges
	at := t0.Add(time.Minute)
	if p.Purged("a", "m", t0) {
		t.Fatal("purged before any purge")
	}
	p.Record("a", "m", at)
	for _, c := range []struct {
		team, model string
		stored      time.Time
		want        bool
	}{
		{"a", "m", t0, true}, {"a", "m", at, true}, {"a", "m", at.Add(time.Millisecond), false},
		{"a", "n", t0, false}, {"b", "m", t0, false},
	} {
		if got := p.Purged(c.team, c.model, c.stored); got != c.want {
			t.Fatalf("after a/m: Purged(%s, %s, %v) = %v", c.team, c.model, c.stored.Sub(t0), got)
		}
	}
	if p.Record("a", "m", t0) {
		t.Fatal("an older purge is news")
	}
	p.Record("a", "", at)
	if !p.Purged("a", "n", t0) || p.Purged("b", "n", t0) {
		t.Fatal("a team's purge")
	}
	p.Record("", "", at)
	if !p.Purged("b", "n", t0) || p.Purged("b", "n", at.Add(time.Second)) {
		t.Fatal("a purge of everything")
	}
}

func TestCountersDrainAndTotals(t *testing.T) {
	var c Counters
	c.Count("a", "m", ResultHit, 10, 0.5)
	c.Count("a", "m", ResultMiss, 0, 0)
	c.Count("b", "m", ResultCoalesced, 4, 0.25)
	c.Count("b", "n", ResultBypass, 0, 0)
	c.Stored("a", "m", 100)
	snap := c.Snapshot()
	d := c.Drain()
	if len(d) != 3 || len(snap) != 3 || len(c.Drain()) != 0 {
		t.Fatalf("drain %+v, then %+v", d, c.Drain())
	}
	c.Undrain(d)
	all, teams, models := Totals(c.Drain())
	if all.Hits != 1 || all.Misses != 1 || all.Coalesced != 1 || all.Bypasses != 1 || all.Entries != 1 || all.Bytes != 100 ||
		all.SavedTokens != 14 || all.SavedUSD != 0.75 || all.HitRate() != 0.5 {
		t.Fatalf("totals %+v", all)
	}
	if len(teams) != 2 || teams[0].Team != "a" || teams[1].Hits+teams[1].Coalesced != 1 || len(models) != 2 || models[0].Model != "m" || models[0].SavedTokens != 14 {
		t.Fatalf("teams %+v models %+v", teams, models)
	}
	c.Stored("a", "m", 5)
	c.ResetEntries("a", "")
	if s := c.Snapshot(); len(s) != 0 {
		t.Fatalf("after ResetEntries: %+v", s)
	}
}

// TestCountersCountAllocs: counting a team and model seen before allocates
// nothing (a cacheable miss counts four times: the request, the entry
// stored, each on the node's totals and on what it has yet to send).
func TestCountersCountAllocs(t *testing.T) {
	var c Counters
	team, model := "team-a", "model-b"
	c.Count(team, model, ResultMiss, 0, 0)
	if n := testing.AllocsPerRun(100, func() {
		c.Count(team, model, ResultMiss, 0, 0)
		c.Stored(team, model, 10)
	}); n != 0 {
		t.Fatalf("Count and Stored allocate %v times a call pair, want 0", n)
	}
}

// TestCountersConcurrent counts from several goroutines while the sender
// drains and a sweep forgets another team: no count is lost (run with
// -race).
func TestCountersConcurrent(t *testing.T) {
	var c Counters
	var wg sync.WaitGroup
	const workers, each = 4, 1000
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c.Count("t", "m", ResultMiss, 0, 0)
				c.Stored("gone", "m"+strconv.Itoa((w+i)%3), 1)
			}
		}()
	}
	var misses int64
	for range 50 {
		for _, s := range c.Drain() {
			if s.Team == "t" {
				misses += s.Misses
			}
		}
		c.Forget(func(team, _ string) bool { return team == "gone" })
	}
	wg.Wait()
	for _, s := range c.Drain() {
		if s.Team == "t" {
			misses += s.Misses
		}
	}
	if misses != workers*each {
		t.Fatalf("drained %d misses, want %d", misses, workers*each)
	}
}
