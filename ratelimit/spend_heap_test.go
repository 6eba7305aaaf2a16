package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/internal/heaptest"
	"switchyard/internal/teamtest"
)

// levelKey builds a level's state key the way package edge does: the base
// is the head of one string that also holds the level's three Redis keys,
// so whatever keeps the base keeps all of it.
func levelKey(team, id string) string {
	b := "sy:{team:" + team + "}:u:" + id + ":"
	all := b + "tat" + b + "par" + b + "bud"
	return all[:len(b)]
}

// TestSharedSpendHeapPerUser: in shared mode every served request's Finish
// tells the fallback its node's share of each level's budget spend
// (Local.Spend). With a million distinct end users on a 720 h budget that
// share must cost the node a few dozen bytes per user, not a full level
// record with its key kept for the whole window (SPEC 3.1: a million end
// users cost bounded memory; SPEC 16: under 150 MB RSS with 100,000).
func TestSharedSpendHeapPerUser(t *testing.T) {
	const n = 100_000
	const maxBytesPerUser = 96 // 52 to 82 as the map grows; a level record with its key was 211
	team := teamtest.Team("acme", teamtest.Limits{})
	lim := teamtest.Level(teamtest.Limits{USD: 10}) // default period: 720h
	l := NewLocal(newFakeClock().Now, 1)
	_, bytes := heaptest.Retained(func() any {
		for i := range n {
			l.Spend(team, &Level{Key: levelKey("acme", "user-"+strconv.Itoa(i)), Limits: lim}, 0.01)
		}
		return l
	})
	per := float64(bytes) / n
	t.Logf("%.1f heap bytes per end user with a spend in the window", per)
	if per > maxBytesPerUser {
		t.Fatalf("%.1f heap bytes per end user, want <= %d", per, maxBytesPerUser)
	}
}

// TestSharedSpendCountsInFallback: the share Spend records is what the
// fallback starts from, for a level whatever its state: never made, live
// (a fallback admission made it), or at rest and swept; and a share whose
// window has ended counts for nothing (SPEC 3.1, 9).
func TestSharedSpendCountsInFallback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		period    time.Duration
		live      bool          // a fallback admission made the level's state first
		sweep     bool          // the sweep ran between the spend and the fallback
		advance   time.Duration // between the spend and the fallback
		wantAdmit int           // $1 admissions the $10/div-2 budget still takes
	}{
		{name: "no state", period: time.Hour, wantAdmit: 2},
		{name: "live state", period: time.Hour, live: true, wantAdmit: 1},
		{name: "swept at rest", period: time.Hour, sweep: true, advance: 2 * time.Minute, wantAdmit: 2},
		{name: "window ended", period: time.Hour, sweep: true, advance: time.Hour, wantAdmit: 5},
		{name: "default period, swept", sweep: true, advance: 24 * time.Hour, wantAdmit: 2},
		{name: "live state, swept at rest", period: time.Hour, live: true, sweep: true, advance: 2 * time.Minute, wantAdmit: 1},
		{name: "live state, window ended", period: time.Hour, live: true, sweep: true, advance: time.Hour, wantAdmit: 5},
		{name: "calendar day, swept", period: -1, sweep: true, advance: time.Hour, wantAdmit: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			l := NewLocal(clk.Now, 2)
			team := teamtest.Team("acme", teamtest.Limits{})
			lim := teamtest.Level(teamtest.Limits{USD: 10, Period: tc.period})
			if tc.period < 0 {
				lim.Budget.Period = config.Period{Calendar: config.PeriodDaily}
			}
			lv := Level{Key: levelKey("acme", "ann"), Name: "ann", Limits: lim}
			admit := func() bool {
				d, err := l.Admit(context.Background(), Admission{RequestID: "r", Team: team, CostUSD: 1, Levels: [2]Level{{}, lv}})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					l.Reconcile(d.Ticket, 0, 1)
				}
				return d.Allowed
			}
			if tc.live && !admit() {
				t.Fatal("the first fallback admission was refused")
			}
			l.Spend(team, &lv, 3) // the shared limiter's finishes, this node's share
			clk.Advance(tc.advance)
			if tc.sweep {
				l.sweep()
			}
			n := 0
			for range 10 {
				if admit() {
					n++
				}
			}
			if n != tc.wantAdmit {
				t.Fatalf("%d admitted at $1 against $5 with a $3 share, want %d", n, tc.wantAdmit)
			}
		})
	}
}

// TestRestSpendSweptWithItsWindow: a level's spend at rest is held while
// its window is open and dropped by the first sweep after it ends, so the
// records a node holds are those of the levels that spent in an open
// window; and LevelUsage reads it.
func TestRestSpendSweptWithItsWindow(t *testing.T) {
	clk := newFakeClock()
	l := NewLocal(clk.Now, 1)
	team := teamtest.Team("acme", teamtest.Limits{})
	lim := teamtest.Level(teamtest.Limits{USD: 10, Period: time.Hour})
	const n = 1000
	for i := range n {
		l.Spend(team, &Level{Key: levelKey("acme", "u"+strconv.Itoa(i)), Limits: lim}, 0.5)
	}
	if got := l.nsubs.Load(); got != 0 {
		t.Fatalf("Spend made %d live levels, want 0", got)
	}
	if u := l.LevelUsage(Level{Key: levelKey("acme", "u7"), Limits: lim}); u.SpentUSD != 0.5 {
		t.Fatalf("LevelUsage of a level at rest: $%v spent, want $0.5", u.SpentUSD)
	}
	for _, tc := range []struct {
		advance time.Duration
		want    int64
	}{
		{59 * time.Minute, n},
		{time.Minute, 0},
	} {
		clk.Advance(tc.advance)
		l.sweep()
		if got := l.rest.n.Load(); got != tc.want {
			t.Fatalf("after %v: %d records at rest, want %d", tc.advance, got, tc.want)
		}
	}
}

// TestSpendMovesWithoutLoss: a level's spend moves between its live state
// and the rest store (admissions make it live, the sweep puts it at rest)
// while Spend adds to it from other goroutines; none is lost or counted
// twice (run with -race).
func TestSpendMovesWithoutLoss(t *testing.T) {
	clk := newFakeClock()
	l := NewLocal(clk.Now, 1)
	team := teamtest.Team("acme", teamtest.Limits{})
	lv := Level{Key: levelKey("acme", "ann"), Name: "ann", Limits: teamtest.Level(teamtest.Limits{USD: 1e9, Period: time.Hour})}
	const spenders, each = 4, 500
	var wg sync.WaitGroup
	for range spenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				l.Spend(team, &lv, 1)
			}
		}()
	}
	stop := make(chan struct{})
	var movers sync.WaitGroup
	movers.Add(2)
	go func() {
		defer movers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				l.sweep()
			}
		}
	}()
	go func() {
		defer movers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				d, _ := l.Admit(context.Background(), Admission{RequestID: "r", Team: team, Levels: [2]Level{{}, lv}})
				l.Reconcile(d.Ticket, 0, 0)
			}
		}
	}()
	wg.Wait()
	close(stop)
	movers.Wait()
	if u := l.LevelUsage(lv); u.SpentUSD != spenders*each {
		t.Fatalf("$%v spent, want $%d", u.SpentUSD, spenders*each)
	}
}
