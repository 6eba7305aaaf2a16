package edge

import (
	"fmt"
	"testing"
	"time"

	"switchyard/cluster"
	"switchyard/config"
	"switchyard/internal/redistest"
	"switchyard/internal/teamtest"
)

// TestSequentialLevelMaxParallelOneNeverRefused: SPEC 3 and 3.1: a release
// is visible to the very next admission at every level, so a strictly
// sequential client at a key's or an end user's max_parallel 1 is never
// refused, although the writer has not run in between (its Release failed
// or was not called: Finish queued it).
func TestSequentialLevelMaxParallelOneNeverRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		team      teamtest.Limits
		key, user teamtest.Limits
	}{
		{name: "key", key: teamtest.Limits{Par: 1}},
		{name: "user", user: teamtest.Limits{Par: 1}},
		{name: "key and user", key: teamtest.Limits{Par: 1}, user: teamtest.Limits{Par: 1}},
		{name: "team and key", team: teamtest.Limits{Par: 1}, key: teamtest.Limits{Par: 1}},
		{name: "key with rpm", key: teamtest.Limits{Par: 1, RPM: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			team := teamtest.Team("seq", tc.team)
			q := &Request{RequestID: "r", Team: team, Tokens: 10,
				Key:  Level{Kind: LevelKey, ID: "k1", Name: "ci", Limits: teamtest.Level(tc.key)},
				User: Level{Kind: LevelUser, ID: "ann", Name: "ann", Limits: teamtest.Level(tc.user)}}
			for i := range 20 {
				b, err := g.r.Begin(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				if !b.Decision.Allowed {
					t.Fatalf("request %d refused: %+v", i, b.Decision)
				}
				g.r.Finish(&b, &Outcome{Served: i%2 == 0, PromptTokens: 5})
			}
		})
	}
}

// TestRealSequentialLevelMaxParallelOne is the same on a real Redis (the
// script's ZREM of a level's releases and its count after them), the
// writer not running: only the admission script can carry the releases.
func TestRealSequentialLevelMaxParallelOne(t *testing.T) {
	srv := redistest.Start(t)
	c, br, err := cluster.NewClient(config.Redis{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	obs := &countObs{}
	r := newRedis(c, br, Config{Prefix: "sy:", Timeout: time.Second, OneShard: true}, nil, nil, nil, obs)
	team := teamtest.Team("seq", teamtest.Limits{RPM: 1e6})
	for i := range 50 {
		q := &Request{RequestID: "r", Team: team, Tokens: 10,
			Key:  Level{Kind: LevelKey, ID: "k{1}:x", Name: "ci", Limits: teamtest.Level(teamtest.Limits{Par: 2})},
			User: Level{Kind: LevelUser, ID: "ann", Name: "ann", Limits: teamtest.Level(teamtest.Limits{Par: 1})}}
		b, err := r.Begin(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Decision.Allowed {
			t.Fatalf("request %d refused: %+v", i, b.Decision)
		}
		r.Finish(&b, &Outcome{Served: true, PromptTokens: 5})
	}
	if n := obs.fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks: not a test of the shared slots", n)
	}
}

// TestOutageLevelAdmissionsCarriedToRedis: SPEC 9: a decision is shared or
// local, never both. What the local fallback admitted for a key or end
// user while Redis was unreachable travels to Redis with that level's next
// admission script, whichever admission of the team reaches Redis first:
// before, only the levels of the team's first call after the outage were
// carried, and every other level found a full bucket in Redis and was
// admitted again on top of what the fallback had admitted.
func TestOutageLevelAdmissionsCarriedToRedis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first string // the level of the team's first admission after the outage ("" = none)
		lim   teamtest.Limits
	}{
		{name: "rpm, another user first", first: "bob", lim: teamtest.Limits{RPM: 2}},
		{name: "tpm, another user first", first: "bob", lim: teamtest.Limits{TPM: 200}},
		{name: "rpm, no other level first", first: "-", lim: teamtest.Limits{RPM: 2}},
		{name: "rpm, same user first", first: "", lim: teamtest.Limits{RPM: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			team := teamtest.Team("out", teamtest.Limits{RPM: 1_000})
			req := func(user string) *Request {
				q := &Request{RequestID: "r", Team: team, Tokens: 100}
				if user != "-" {
					q.User = Level{Kind: LevelUser, ID: user, Name: user, Limits: teamtest.Level(tc.lim)}
				}
				return q
			}
			g.up.down.Store(true) // the breaker is open: the fallback admits ann's quota
			for i := range 2 {
				b, _ := g.r.Begin(t.Context(), req("ann"))
				if !b.Decision.Allowed || !b.Local {
					t.Fatalf("local admission %d: %+v local=%v", i, b.Decision, b.Local)
				}
				g.r.Finish(&b, &Outcome{Served: true, PromptTokens: 100})
			}
			g.up.down.Store(false)
			if tc.first != "" {
				b, _ := g.r.Begin(t.Context(), req(tc.first))
				if !b.Decision.Allowed || b.Local {
					t.Fatalf("first shared admission: %+v local=%v", b.Decision, b.Local)
				}
				g.r.Finish(&b, &Outcome{Served: true, PromptTokens: 100})
			}
			b, _ := g.r.Begin(t.Context(), req("ann"))
			if b.Local {
				t.Fatal("not decided in Redis")
			}
			if b.Decision.Allowed {
				t.Fatalf("ann admitted in Redis on top of the quota the fallback admitted this minute: %+v", b.Decision)
			}
		})
	}
}

// TestOutageSlotsCarriedToRedis: SPEC 3 and 9: max_parallel stays exact
// across a Redis outage and its recovery, at every level. The requests the
// local fallback admitted while Redis was unreachable still run when it is
// back: the team's first admission script after the outage puts their
// slots in Redis (under a lease the writer renews), so neither this node
// nor another admits on top of them, and their Finish releases them there.
// Before, Redis found the sets empty and admitted max_parallel more.
func TestOutageSlotsCarriedToRedis(t *testing.T) {
	for _, tc := range []struct {
		name        string
		team        teamtest.Limits
		key         teamtest.Limits
		held        int    // local admissions of ann still running at recovery
		first       string // the user of the team's first admission after the outage
		finishFirst bool   // the held requests end before Redis is back
	}{
		{name: "team", team: teamtest.Limits{Par: 2}, held: 2, first: "ann"},
		{name: "key", key: teamtest.Limits{Par: 1}, held: 1, first: "ann"},
		{name: "user, another user first", held: 1, first: "bob"},
		{name: "ended before recovery", team: teamtest.Limits{Par: 2}, held: 2, first: "ann", finishFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			other := newRedis(g.c, nil, Config{Prefix: "sy:", Timeout: time.Second, Clock: g.clk.Now}, nil, nil, nil, nil)
			team := teamtest.Team("par", tc.team)
			userLim := teamtest.Limits{Par: 1}
			if tc.name != "user, another user first" {
				userLim = teamtest.Limits{}
			}
			req := func(user string) *Request {
				return &Request{RequestID: "r", Team: team, Tokens: 10,
					Key:  Level{Kind: LevelKey, ID: "k1", Name: "ci", Limits: teamtest.Level(tc.key)},
					User: Level{Kind: LevelUser, ID: user, Name: user, Limits: teamtest.Level(userLim)}}
			}
			g.up.down.Store(true)
			var held []Begun
			for i := range tc.held {
				b, _ := g.r.Begin(t.Context(), req("ann"))
				if !b.Decision.Allowed || !b.Local {
					t.Fatalf("local admission %d: %+v local=%v", i, b.Decision, b.Local)
				}
				held = append(held, b)
			}
			if tc.finishFirst {
				for i := range held {
					g.r.Finish(&held[i], &Outcome{})
				}
				held = nil
			}
			g.up.down.Store(false)
			b, _ := g.r.Begin(t.Context(), req(tc.first))
			if b.Local {
				t.Fatal("not decided in Redis")
			}
			if tc.first != "ann" {
				if !b.Decision.Allowed {
					t.Fatalf("bob refused: %+v", b.Decision)
				}
				g.r.Finish(&b, &Outcome{})
				b, _ = g.r.Begin(t.Context(), req("ann"))
			}
			if want := tc.finishFirst; b.Decision.Allowed != want {
				t.Fatalf("this node, with %d local requests of ann running: allowed=%v, want %v (%+v)", len(held), b.Decision.Allowed, want, b.Decision)
			}
			g.r.Finish(&b, &Outcome{})
			ob, _ := other.Begin(t.Context(), req("ann"))
			if want := tc.finishFirst; ob.Decision.Allowed != want || ob.Local {
				t.Fatalf("another node: allowed=%v local=%v, want %v (%+v)", ob.Decision.Allowed, ob.Local, want, ob.Decision)
			}
			other.Finish(&ob, &Outcome{})
			if !g.step(t) { // renews the carried slots like any other
				t.Fatal("writer step failed")
			}
			if len(held) == 0 {
				return
			}
			g.r.Finish(&held[0], &Outcome{Served: true, PromptTokens: 5})
			b, _ = g.r.Begin(t.Context(), req("ann"))
			if !b.Decision.Allowed || b.Local {
				t.Fatalf("after a carried request ended: %+v local=%v, want admitted in Redis", b.Decision, b.Local)
			}
			g.r.Finish(&b, &Outcome{})
			for i := range held[1:] {
				g.r.Finish(&held[1+i], &Outcome{})
			}
			g.step(t)
			if ts := g.r.team(team); !ts.idle() {
				t.Fatal("the team's record is not at rest once every request ended")
			}
		})
	}
}

// TestRealOutageSlotsCarriedToRedis is TestOutageSlotsCarriedToRedis's team
// and key case on a real Redis: the script's ZADD of the fallback's slots.
func TestRealOutageSlotsCarriedToRedis(t *testing.T) {
	srv := redistest.Start(t)
	c, _, err := cluster.NewClient(config.Redis{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	up := &health{}
	r := newRedis(c, up, Config{Prefix: "sy:", Timeout: time.Second, OneShard: true}, nil, nil, nil, nil)
	other := newRedis(c, nil, Config{Prefix: "sy:", Timeout: time.Second, OneShard: true}, nil, nil, nil, nil)
	team := teamtest.Team("rpar", teamtest.Limits{Par: 1})
	q := &Request{RequestID: "r", Team: team, Key: Level{Kind: LevelKey, ID: "k{1}", Name: "ci", Limits: teamtest.Level(teamtest.Limits{Par: 1})}}
	up.down.Store(true)
	held, _ := r.Begin(t.Context(), q)
	if !held.Decision.Allowed || !held.Local {
		t.Fatalf("local admission: %+v", held.Decision)
	}
	up.down.Store(false)
	for i, st := range []*Redis{r, other} {
		b, _ := st.Begin(t.Context(), q)
		if b.Decision.Allowed || b.Local {
			t.Fatalf("node %d admitted on top of the local request still running: %+v local=%v", i, b.Decision, b.Local)
		}
		st.Finish(&b, &Outcome{})
	}
	r.Finish(&held, &Outcome{})
	b, _ := r.Begin(t.Context(), q)
	if !b.Decision.Allowed || b.Local {
		t.Fatalf("after the local request ended: %+v local=%v", b.Decision, b.Local)
	}
	r.Finish(&b, &Outcome{})
}

// TestUnsharedSubsPruned: the levels the local fallback admitted during an
// outage carry their TATs to Redis with their next admission; a level not
// admitted again carries nothing once its TATs are past (a minute), and is
// dropped by the next walk, so the team's count goes back to zero (its
// admissions stop taking the team's lock) and the entries' memory is
// freed. Before, they stayed until the team's map was full (50,000).
func TestUnsharedSubsPruned(t *testing.T) {
	ts := newTeamState("sy:", "t", "n1")
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano()
	until := t0 + int64(time.Minute+time.Second)
	for i := range 1000 {
		ts.markUnsharedSub(fmt.Sprintf("sy:{team:t}:u:%d", i), t0, until)
	}
	if u := ts.unsharedSubs.Load(); u == nil || len(u.until) != 1000 {
		t.Fatal("not 1000 marked")
	}
	// while the TATs are ahead, a level's next admission carries them, once
	if !ts.takeUnsharedSub("sy:{team:t}:u:1", t0+int64(time.Second)) || ts.takeUnsharedSub("sy:{team:t}:u:1", t0+int64(time.Second)) {
		t.Fatal("a marked level not carried exactly once")
	}
	// past them: another level's admission finds nothing to carry, and the
	// walk drops every past entry
	later := until + int64(unsharedPrune)
	if ts.takeUnsharedSub("sy:{team:t}:u:2", later) {
		t.Fatal("a level whose local TATs are past still carried them")
	}
	if u := ts.unsharedSubs.Load(); u != nil {
		t.Fatalf("%d entries left after their TATs passed, want none (and the record dropped)", len(u.until))
	}
}
