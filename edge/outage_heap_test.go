package edge

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/internal/heaptest"
	"switchyard/internal/teamtest"
)

// deadRig is a Redis edge state whose client fails every call at once (a
// Redis that went away: the dialer is refused), on a fake clock.
func deadRig(t testing.TB, breakerOpen bool) *miniRig {
	t.Helper()
	clk := newFakeClock()
	c := redis.NewClient(&redis.Options{MaxRetries: -1, DialerRetries: 1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("connect: connection refused")
		}})
	t.Cleanup(func() { _ = c.Close() })
	g := &miniRig{clk: clk, c: c, obs: &countObs{}, up: &health{}}
	g.up.down.Store(breakerOpen)
	g.r = newRedis(c, g.up, Config{Prefix: "sy:", Clock: clk.Now, OneShard: true}, nil, nil, nil, g.obs)
	return g
}

// serveOutage serves one request for each of users end users of each of
// teams teams through Begin and Finish on g, as the gateway does during a
// Redis outage: the team and each user have a budget (the team's
// user_limits, one pointer), so every Finish leaves the user's spend for
// Redis (SPEC 9: replayed when it is back); the writer runs (and fails)
// after each team.
func serveOutage(t *testing.T, g *miniRig, teams, users int) {
	t.Helper()
	for i := range teams {
		name := "team-" + strconv.Itoa(i)
		team := teamtest.Team(name, teamtest.Limits{USD: 1_000_000})
		lim := teamtest.Level(teamtest.Limits{RPM: 100, USD: 100})
		for u := range users {
			id := "user-" + strconv.Itoa(u)
			q := &Request{RequestID: "r", Team: team, Tokens: 100, CostUSD: 0.01,
				User: Level{Kind: LevelUser, ID: id, Name: id, Limits: lim}}
			b, err := g.r.Begin(context.Background(), q)
			if err != nil || !b.Decision.Allowed || !b.Local {
				t.Fatalf("begin %s/%s: %v %+v local=%v", name, id, err, b.Decision, b.Local)
			}
			g.r.Finish(&b, &Outcome{Served: true, PromptTokens: 50, CompletionTokens: 50, CostUSD: 0.01})
		}
		if g.step(t) {
			t.Fatal("the writer reached a dead Redis")
		}
	}
}

// heldLevels is the key and user level records of every team of r and
// their parts of the batches in flight.
func heldLevels(r *Redis) int {
	n := 0
	r.teams.Range(func(_ string, ts *teamState) {
		ts.mu.Lock()
		n += len(ts.subs)
		if ts.flight != nil {
			n += len(ts.flight.subs)
		}
		ts.mu.Unlock()
	})
	return n
}

// TestOutageLevelsBoundedPerNode: SPEC 9 (the writer's memory is bounded
// however long Redis is gone) and 16 (under 150 MB with 100,000 end
// users). Every end user with a budget served during an outage leaves a
// level record with its spend for Redis, about 400 bytes. The bound was
// per team only (maxLevels, 50,000): many teams, or a million end users,
// grew the node by 620 bytes per user served (200,000 users of 10 teams:
// 124 MB, every record kept). Now the levels of all teams together are
// bounded too; past the bound a new level's writes are dropped and
// counted, those held are kept.
func TestOutageLevelsBoundedPerNode(t *testing.T) {
	const maxBytesPerLevel = 450
	for _, tc := range []struct {
		name         string
		open         bool // the breaker is open (else every call fails)
		teams, users int
		limit        int64 // the node-wide bound (maxNodeLevels, lowered)
	}{
		{"below the bound", true, 2, 1_000, 3_000},
		{"breaker open, many teams", true, 8, 1_500, 3_000},
		{"client failing, many teams", false, 4, 2_000, 3_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := deadRig(t, tc.open)
			g.r.w.maxLevels = tc.limit
			serveOutage(t, g, tc.teams, tc.users)
			n := tc.teams * tc.users
			held, dropped := heldLevels(g.r), int(g.obs.dropped.Load())
			t.Logf("%d users served: %d levels held, %d dropped", n, held, dropped)
			if want := min(n, int(tc.limit)); held > want {
				t.Errorf("%d levels held, want <= %d", held, want)
			}
			if held+dropped < n {
				t.Errorf("%d held + %d dropped of %d levels: some were lost uncounted", held, dropped, n)
			}
			if n <= int(tc.limit) && dropped != 0 {
				t.Errorf("%d levels dropped below the bound", dropped)
			}
		})
	}
	// what a level with a spend pending costs the node, so the bound is one
	// in bytes: maxNodeLevels of them
	const n = 20_000
	g := deadRig(t, true)
	team := teamtest.Team("heap", teamtest.Limits{})
	ts := g.r.team(team)
	lim := teamtest.Level(teamtest.Limits{USD: 100})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}
	_, bytes := heaptest.Retained(func() any {
		for _, id := range ids {
			lv := Level{Kind: LevelUser, ID: id, Name: id, Limits: lim}
			w := &finishWrite{nsub: 1}
			w.subs[0] = subWrite{lv: lv, keys: newLevelKeys(ts.keys.base(), &lv), usd: 0.01}
			ts.add(team, w, g.r.w, 10)
		}
		return ts
	})
	per := bytes / n
	t.Logf("a level with a spend pending: %d B; %d of them: %d MB", per, maxNodeLevels, per*maxNodeLevels>>20)
	if per > maxBytesPerLevel {
		t.Errorf("a level with a spend pending keeps %d B, want <= %d", per, maxBytesPerLevel)
	}
}

// TestOutageLevelsCountReturnsToZero: once Redis is back and the writer has
// sent what the levels held, the node's count of level records is zero
// again (a count that drifted up would drop every level's writes for
// good), and the spend of the levels held reached Redis whole.
func TestOutageLevelsCountReturnsToZero(t *testing.T) {
	g := newMiniRig(t, Config{OneShard: true}, false)
	g.r.w.maxLevels = 500
	g.up.down.Store(true)
	g.m.Close()
	serveOutage(t, g, 3, 400)
	if held := g.r.w.levels.Load(); held > 500 {
		t.Fatalf("%d levels counted, want <= 500", held)
	}
	if err := g.m.Restart(); err != nil {
		t.Fatal(err)
	}
	g.up.down.Store(false)
	for i := 0; i < 20 && !g.r.w.empty(); i++ {
		g.advance(time.Second)
		g.step(t)
	}
	if !g.r.w.empty() {
		t.Fatal("writes still pending after Redis came back")
	}
	if n := g.r.w.levels.Load(); n != 0 {
		t.Fatalf("%d level records counted with none held", n)
	}
	if held, dropped := int64(500), g.obs.dropped.Load(); dropped != 3*400-held {
		t.Errorf("%d levels dropped, want %d", dropped, 3*400-held)
	}
}
