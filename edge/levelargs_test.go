package edge

import (
	"reflect"
	"testing"

	"switchyard/config"
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
