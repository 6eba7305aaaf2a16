package cache

import (
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
