package edge

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/internal/teamtest"
)

// levelOutcomes is the fixture of the usage-by-level tests: served and
// cached requests of two keys, users whose ids hold the field separator and
// the escape, and a request that was neither (it makes no row).
func levelOutcomes() []Outcome {
	return []Outcome{
		{Served: true, Deployment: "d1", Model: "m", KeyID: "key_a", User: "ann", PromptTokens: 10, CachedTokens: 4, CompletionTokens: 5, CostUSD: 0.25},
		{Served: true, Deployment: "d2", Model: "m", KeyID: "key_a", User: "ann", PromptTokens: 1, CompletionTokens: 2, CostUSD: 0.5},
		{Served: true, Deployment: "d1", Model: "m", KeyID: "key_a", User: "a|b|c|req", PromptTokens: 3, CompletionTokens: 3, CostUSD: 0.125},
		{Served: true, Deployment: "d1", Model: "x", KeyID: "key|b", User: "%7C", PromptTokens: 7, CompletionTokens: 1, CostUSD: 1},
		{Served: true, Deployment: "d1", Model: "x", KeyID: "key|b", User: "", PromptTokens: 2, CompletionTokens: 2},
		{Cached: true, Model: "m", KeyID: "key_a", User: "ann", SavedUSD: 0.75},
		{Served: false, Model: "m", KeyID: "key_a", User: "ann"},
	}
}

// wantLevelRows are the rows of levelOutcomes on day.
func wantLevelRows(team, day string) []UsageRow {
	return []UsageRow{
		{Team: team, Day: day, Model: "m", Key: "key_a", User: "a|b|c|req", UsageSums: UsageSums{Requests: 1, InputTokens: 3, OutputTokens: 3, CostUSD: 0.125}},
		{Team: team, Day: day, Model: "m", Key: "key_a", User: "ann", UsageSums: UsageSums{Requests: 2, InputTokens: 11, CachedTokens: 4, OutputTokens: 7, CostUSD: 0.75, CachedRequests: 1, SavedUSD: 0.75}},
		{Team: team, Day: day, Model: "x", Key: "key|b", User: "", UsageSums: UsageSums{Requests: 1, InputTokens: 2, OutputTokens: 2}},
		{Team: team, Day: day, Model: "x", Key: "key|b", User: "%7C", UsageSums: UsageSums{Requests: 1, InputTokens: 7, OutputTokens: 1, CostUSD: 1}},
	}
}

func sameRows(t *testing.T, what string, got, want []UsageRow) {
	t.Helper()
	sortRows(got)
	sortRows(want)
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if math.Abs(g.CostUSD-w.CostUSD) > 1e-9 || math.Abs(g.SavedUSD-w.SavedUSD) > 1e-9 {
			t.Fatalf("%s: row %d %+v, want %+v", what, i, g, w)
		}
		g.CostUSD, g.SavedUSD, w.CostUSD, w.SavedUSD = 0, 0, 0, 0
		if g != w {
			t.Fatalf("%s: row %d %+v, want %+v", what, i, g, w)
		}
	}
}

// finishAll begins and finishes one request per outcome.
func finishAll(t *testing.T, st State, team *catalog.Team, os []Outcome) {
	t.Helper()
	for i := range os {
		b := begin(t, st, team, 10)
		st.Finish(&b, &os[i])
	}
}

// TestUsageRows: the local state and the Redis state (after the writer
// sent the rows) answer the same rows, names holding '|' and '%7C' intact,
// cached answers counted apart; filters select rows.
func TestUsageRows(t *testing.T) {
	for _, impl := range []struct {
		name   string
		env    func(*testing.T) env
		shared bool
	}{{"local", localEnv, false}, {"redis", miniEnv, true}} {
		t.Run(impl.name, func(t *testing.T) {
			e := impl.env(t)
			team := teamtest.Team("lv", teamtest.Limits{})
			finishAll(t, e.st, team, levelOutcomes())
			e.settle(t)
			e.advance(defaultUsageEvery)
			e.settle(t)
			now := newFakeClock().Now().Add(defaultUsageEvery)
			day := now.UTC().Format(time.DateOnly)
			q := UsageQuery{Teams: []string{"lv", "nobody"}, From: now, To: now}
			rep, err := e.st.UsageRows(context.Background(), q)
			if err != nil || rep.Shared != impl.shared {
				t.Fatalf("report %+v, %v", rep, err)
			}
			sameRows(t, "all", rep.Rows, wantLevelRows("lv", day))
			q.Key, q.User = "key|b", "%7C"
			rep, _ = e.st.UsageRows(context.Background(), q)
			sameRows(t, "key and user", rep.Rows, wantLevelRows("lv", day)[3:])
			q = UsageQuery{Teams: []string{"lv"}, From: now.AddDate(0, 0, -3), To: now.AddDate(0, 0, -1)}
			if rep, _ = e.st.UsageRows(context.Background(), q); len(rep.Rows) != 0 {
				t.Fatalf("days before: %+v", rep.Rows)
			}
			e.check(t)
		})
	}
}

// TestUsageRowsThroughOutage: rows served while Redis is gone stay in the
// writer (and the node's book answers, unshared), and reach Redis exactly
// once when it is back.
func TestUsageRowsThroughOutage(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("out", teamtest.Limits{})
	os := levelOutcomes()
	finishAll(t, g.r, team, os[:3])
	g.advance(defaultUsageEvery)
	if !g.step(t) {
		t.Fatal("step failed")
	}
	g.m.Close()
	g.up.down.Store(true)
	finishAll(t, g.r, team, os[3:])
	for range 3 {
		g.advance(defaultUsageEvery)
		g.step(t) // fails: kept
	}
	now := g.clk.Now()
	day := now.UTC().Format(time.DateOnly)
	q := UsageQuery{Teams: []string{"out"}, From: now, To: now}
	rep, _ := g.r.UsageRows(context.Background(), q)
	if rep.Shared {
		t.Fatal("shared while Redis is down")
	}
	sameRows(t, "the node's book", rep.Rows, wantLevelRows("out", day))
	if err := g.m.Restart(); err != nil {
		t.Fatal(err)
	}
	g.up.down.Store(false)
	for i := 0; i < 5 && g.r.team(team).pending(); i++ {
		g.advance(defaultUsageEvery)
		g.step(t)
	}
	rep, _ = g.r.UsageRows(context.Background(), q)
	if !rep.Shared {
		t.Fatal("not shared once Redis is back")
	}
	sameRows(t, "in Redis after the outage", rep.Rows, wantLevelRows("out", day))
	if ttl := g.m.TTL("sy:{team:out}:usage:" + day); ttl < 90*24*time.Hour || ttl > 92*24*time.Hour {
		t.Fatalf("day hash TTL %v, want about 91 days", ttl)
	}
}

// TestUsageRowsBounded: 20,000 distinct end users cost a node a bounded
// number of rows, pending and in its book; the rows past the bound are
// folded into OtherUser and counted, and the totals stay exact.
func TestUsageRowsBounded(t *testing.T) {
	const users = 20000
	check := func(t *testing.T, rows []UsageRow, folded int64) {
		t.Helper()
		var sum UsageSums
		other := int64(0)
		for _, r := range rows {
			sum.Add(&r.UsageSums)
			if r.User == OtherUser {
				other += r.Requests
			}
		}
		if len(rows) > maxTeamRows+1 || sum.Requests != users || sum.InputTokens != 2*users || math.Abs(sum.CostUSD-users*0.5) > 1e-6 {
			t.Fatalf("%d rows, sums %+v", len(rows), sum)
		}
		if other != users-maxTeamRows || folded < users-maxTeamRows {
			t.Fatalf("%d requests folded into %s, %d counted; want %d", other, OtherUser, folded, users-maxTeamRows)
		}
	}
	serve := func(st State, team *catalog.Team) {
		for i := range users {
			b := begin(t, st, team, 1)
			st.Finish(&b, &Outcome{Served: true, Deployment: "d", Model: "m", KeyID: "k", User: fmt.Sprintf("u%06d", i), PromptTokens: 2, CostUSD: 0.5})
		}
	}
	t.Run("local", func(t *testing.T) {
		clk := newFakeClock()
		l := NewLocal(clk.Now, nil)
		team := teamtest.Team("many", teamtest.Limits{})
		serve(l, team)
		rep, _ := l.UsageRows(context.Background(), UsageQuery{Teams: []string{"many"}, From: clk.Now(), To: clk.Now()})
		check(t, rep.Rows, rep.Folded)
	})
	t.Run("redis", func(t *testing.T) {
		g := newMiniRig(t, Config{}, false)
		team := teamtest.Team("many", teamtest.Limits{})
		serve(g.r, team)
		ts := g.r.team(team)
		ts.mu.Lock()
		pending := len(ts.byLevel)
		if ts.has1 { // the first row, inline
			pending++
		}
		ts.mu.Unlock()
		if pending > maxTeamRows+1 || g.r.w.rowCount.Load() != int64(pending) {
			t.Fatalf("%d rows pending (counted %d), bound %d", pending, g.r.w.rowCount.Load(), maxTeamRows)
		}
		if g.obs.dropped.Load() < users-maxTeamRows {
			t.Fatalf("folds counted %d", g.obs.dropped.Load())
		}
		g.step(t) // the rows wait usageEvery
		g.advance(defaultUsageEvery)
		for i := 0; i < 40 && ts.pending(); i++ {
			g.step(t)
			g.advance(time.Millisecond) // the rows left over go in the next batch, not after another wait
		}
		if ts.pending() || g.r.w.rowCount.Load() != 0 {
			t.Fatalf("rows still pending: %d", g.r.w.rowCount.Load())
		}
		now := g.clk.Now()
		rep, _ := g.r.UsageRows(context.Background(), UsageQuery{Teams: []string{"many"}, From: now, To: now})
		if !rep.Shared {
			t.Fatal("not read from Redis")
		}
		check(t, rep.Rows, rep.Folded)
	})
}

// TestRowFieldEscaping: a row's hash field reads back as the names it was
// made of, whatever '|' and '%' they hold.
func TestRowFieldEscaping(t *testing.T) {
	for _, k := range []rowKey{
		{model: "m", key: "k", user: "u"},
		{model: "m", key: "", user: ""},
		{model: "a|b", key: "|", user: "||req"},
		{model: "%", key: "%7C", user: "%25|%7c"},
	} {
		f := rowField(k) + "usd"
		m, key, u, metric, ok := parseField(f)
		if !ok || m != k.model || key != k.key || u != k.user || usageMetrics[metric] != "usd" {
			t.Fatalf("%q from %+v read back as %q %q %q %d %v", f, k, m, key, u, metric, ok)
		}
	}
	for _, bad := range []string{"d0|req", "a|b|c|nope", "a|b|c|d|req"} {
		if _, _, _, _, ok := parseField(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

// TestUsageRowsUnderPressure: a team serving many distinct end users does
// not hold its rows for usageEvery: past pressureRows they go out with
// the next flush, so a writer that keeps flushing keeps every user's row
// (before, they were held, reached maxTeamRows within a second of
// bench/overhead.sh -l and were folded into OtherUser).
func TestUsageRowsUnderPressure(t *testing.T) {
	const users = 3 * maxTeamRows
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("many", teamtest.Limits{})
	for i := range users {
		b := begin(t, g.r, team, 1)
		g.r.Finish(&b, &Outcome{Served: true, Deployment: "d", Model: "m", KeyID: "k", User: fmt.Sprintf("u%06d", i), PromptTokens: 2, CostUSD: 0.5})
		if i%200 == 199 {
			g.step(t) // the writer's rhythm; the clock stays within usageEvery
		}
	}
	if f := g.obs.dropped.Load(); f != 0 {
		t.Fatalf("%d rows folded while the writer kept flushing", f)
	}
	g.advance(defaultUsageEvery)
	for i := 0; i < 40 && g.r.team(team).pending(); i++ {
		g.step(t)
		g.advance(time.Millisecond)
	}
	now := g.clk.Now()
	rep, _ := g.r.UsageRows(context.Background(), UsageQuery{Teams: []string{"many"}, From: now, To: now})
	if len(rep.Rows) != users || rep.Folded != 0 {
		t.Fatalf("%d rows, %d folded; want %d rows", len(rep.Rows), rep.Folded, users)
	}
}

// sortRows orders rows by team, day, model, key, user (a stable
// answer).
func sortRows(rows []UsageRow) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if a.Team != b.Team {
			return a.Team < b.Team
		}
		if a.Day != b.Day {
			return a.Day < b.Day
		}
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.User < b.User
	})
}

// TestUsageRowsReadsInBatches: reading 2,500 teams over 30 days (75,000
// hashes, two of them written) holds one pipeline's replies at a time: the
// live heap after each pipeline stays within a few MB of where it started
// (holding every reply until the end grew it by about 20 MB), and the rows
// found are all there.
func TestUsageRowsReadsInBatches(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("lv", teamtest.Limits{})
	finishAll(t, g.r, team, levelOutcomes())
	for i := 0; i < 5 && g.r.team(team).pending(); i++ {
		g.advance(defaultUsageEvery)
		g.step(t)
	}
	now := g.clk.Now()
	day := now.UTC().Format(time.DateOnly)
	teams := []string{"lv"}
	for i := range 2499 {
		teams = append(teams, "t"+strconv.Itoa(i))
	}
	q := UsageQuery{Teams: teams, From: now.AddDate(0, 0, -29), To: now}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base, peak, batches := heap(), uint64(0), 0
	usageRowsBatchHook = func() { batches++; peak = max(peak, heap()) }
	defer func() { usageRowsBatchHook = nil }()
	rep, err := g.r.UsageRows(context.Background(), q)
	if err != nil || !rep.Shared {
		t.Fatalf("report shared %v, %v", rep.Shared, err)
	}
	sameRows(t, "all", rep.Rows, wantLevelRows("lv", day))
	if want := (2500 + 32) / 33; batches != want { // 33 teams of 30 days a pipeline
		t.Fatalf("%d pipelines for 2,500 teams of 30 days, want %d", batches, want)
	}
	if grown := int64(peak) - int64(base); grown > 6<<20 {
		t.Fatalf("the live heap grew by %d bytes while reading, want under 6 MiB", grown)
	}

	// a day's key of another type spoils only its own hash
	usageRowsBatchHook = nil
	if err := g.m.Set("sy:{team:lv}:usage:"+now.AddDate(0, 0, -3).UTC().Format(time.DateOnly), "not a hash"); err != nil {
		t.Fatal(err)
	}
	rep, err = g.r.UsageRows(context.Background(), UsageQuery{Teams: []string{"lv"}, From: q.From, To: q.To})
	if err != nil || !rep.Shared {
		t.Fatalf("with a key of another type: shared %v, %v", rep.Shared, err)
	}
	sameRows(t, "with a key of another type", rep.Rows, wantLevelRows("lv", day))
}
