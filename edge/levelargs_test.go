package edge

import (
	"reflect"
	"testing"

	"switchyard/config"
	"switchyard/internal/teamtest"
)

// TestLevelArgs: an end user's limit arguments are boxed once and reused
// for every user whose limits are equal (the team's user_limits), made
// again when they differ (a user with limits of their own, a reload), and
// a key's are made for each admission; all equal the limits they stand for.
func TestLevelArgs(t *testing.T) {
	k := newTeamKeys("p:", "t", "n")
	want := func(l *config.Limits, lv *Level) []any {
		return []any{l.RPM, l.TPM, l.MaxParallel, l.Budget.USD, budgetCode(lv)}
	}
	check := func(lv *Level) *boxedLevel {
		t.Helper()
		if got := k.levelArgs(nil, lv); !reflect.DeepEqual(got, want(lv.Limits, lv)) {
			t.Fatalf("%s %s: args %v, want %v", lv.Kind, lv.ID, got, want(lv.Limits, lv))
		}
		return k.users.Load()
	}
	team := &config.Limits{RPM: 1000, TPM: 50_000, Budget: config.Budget{USD: 2}}
	b1 := check(&Level{Kind: LevelUser, ID: "u1", Limits: team})
	if b1 == nil {
		t.Fatal("an end user's arguments were not kept")
	}
	same := *team // equal limits under another pointer (the next snapshot's)
	if b := check(&Level{Kind: LevelUser, ID: "u2", Limits: &same}); b != b1 {
		t.Fatal("equal user limits boxed their arguments again")
	}
	own := &config.Limits{RPM: 5}
	if b := check(&Level{Kind: LevelUser, ID: "vip", Limits: own}); b == b1 || b.lim != *own {
		t.Fatal("a user with limits of their own got the team's arguments")
	}
	if b := check(&Level{Kind: LevelKey, ID: "k1", Limits: team}); b.lim != *own {
		t.Fatal("a key's arguments replaced the end users'")
	}
	same.RPM = 7 // limits changed in place are never served stale
	check(&Level{Kind: LevelUser, ID: "u2", Limits: &same})
}

// TestLimitArgsShared: teams with equal limits share one boxed copy of
// their limit arguments (a team's record then holds a pointer to them and
// no object of its own); the values are the team's, a team with other
// limits gets its own, and a team whose limits change (a reload) gets the
// new ones.
func TestLimitArgsShared(t *testing.T) {
	a := teamtest.Team("a", teamtest.Limits{RPM: 100_000, TPM: 5_000_000, USD: 300})
	b := teamtest.Team("b", teamtest.Limits{RPM: 100_000, TPM: 5_000_000, USD: 300})
	c := teamtest.Team("c", teamtest.Limits{RPM: 70_000, TPM: 5_000_000, USD: 300})
	ka, kb, kc := newTeamKeys("p:", "a", "n"), newTeamKeys("p:", "b", "n"), newTeamKeys("p:", "c", "n")
	la := ka.limitArgs(a)
	if want := [5]any{int64(100_000), int64(5_000_000), int64(0), 300.0, la.args[4]}; la.args != want {
		t.Fatalf("args %v, want %v", la.args, want)
	}
	if n := testing.AllocsPerRun(20, func() { kb.limits.Store(nil); kb.limitArgs(b) }); n > 0 {
		t.Fatalf("a team with the same limits as another made %v objects for its arguments, want 0 (shared)", n)
	}
	if kb.limitArgs(b) != la {
		t.Fatal("two teams of equal limits hold two copies of their arguments")
	}
	if lc := kc.limitArgs(c); lc.args[0] != any(int64(70_000)) || lc.args[1] != any(int64(5_000_000)) {
		t.Fatalf("other limits got args %v", lc.args)
	}
	reloaded := teamtest.Team("a", teamtest.Limits{RPM: 50_000, TPM: 5_000_000, USD: 300})
	if l := ka.limitArgs(reloaded); l.args[0] != any(int64(50_000)) {
		t.Fatalf("after a reload to rpm 50000 the args are %v", l.args)
	}
}

// TestKeyLevelArgsAllocateNothing: a key's limit arguments are the shared
// boxes of its limit tuple, so an admission that meets a key level boxes
// nothing (before, each one boxed its key's limits again).
func TestKeyLevelArgsAllocateNothing(t *testing.T) {
	k := newTeamKeys("p:", "t", "n")
	lim := &config.Limits{RPM: 600_000, TPM: 9_000_000, Budget: config.Budget{USD: 25}}
	lv := &Level{Kind: LevelKey, ID: "k1", Limits: lim}
	buf := make([]any, 0, 5)
	k.levelArgs(buf, lv)
	if n := testing.AllocsPerRun(50, func() { k.levelArgs(buf[:0], lv) }); n != 0 {
		t.Fatalf("a key level's arguments allocated %v objects an admission, want 0", n)
	}
	if got, want := k.levelArgs(nil, lv), []any{int64(600_000), int64(9_000_000), int64(0), 25.0, budgetCode(lv)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("args %v, want %v", got, want)
	}
}
