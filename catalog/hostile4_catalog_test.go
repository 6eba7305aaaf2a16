package catalog

import (
	"testing"
	"time"

	"switchyard/config"
)

// A team the config file may name (config.ValidTeamName: any text without
// '/', '{', '}' or control characters) is seeded into the catalog; the
// admin API must then be able to change its settings (SPEC 11: PUT
// /admin/teams/{name} with the config's team fields). Only a new team is
// held to the API's narrower alphabet.
func TestHostile4PutTeamKeepsConfigTeamNames(t *testing.T) {
	for _, name := range []string{"ops@corp", "web team", "équipe"} {
		if !config.ValidTeamName(name) {
			t.Fatalf("%q: the file may not name it; pick another", name)
		}
		cfg := &config.Config{Teams: []config.Team{{Name: name, Keys: config.PlainKeys("sk-" + name), Models: []string{"*"}}}}
		cur := SeedState(cfg)
		next, created, err := PutTeam(cur, name, TeamInput{Models: []string{"*"}, RPM: 60}, nil)
		if err != nil {
			t.Fatalf("%q: a seeded team's settings cannot be changed: %v", name, err)
		}
		if created || next.Teams[next.team(name)].RPM != 60 || len(next.Teams[next.team(name)].Keys) != 1 {
			t.Fatalf("%q: created=%v team=%+v", name, created, next.Teams[next.team(name)])
		}
		// a new team of such a name stays refused (the API's alphabet)
		if _, _, err := PutTeam(cur, name+"2", TeamInput{Models: []string{"*"}}, nil); err == nil {
			t.Fatalf("%q: a new team outside the API's alphabet was created", name+"2")
		}
	}
}

// Moving a config key from one team to another in the file (valid: the key
// names one team) and reloading must move it, whatever the order of the
// teams in the file: the team it leaves no longer holds it once synced.
func TestHostile4SyncConfigKeysMovesAKey(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seed := &config.Config{Teams: []config.Team{
		{Name: "a", Keys: config.PlainKeys("sk-a", "sk-moving"), Models: []string{"*"}},
		{Name: "b", Keys: config.PlainKeys("sk-b"), Models: []string{"*"}},
	}}
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		cur := SeedState(seed)
		teams := []config.Team{
			{Name: "a", Keys: config.PlainKeys("sk-a"), Models: []string{"*"}},
			{Name: "b", Keys: config.PlainKeys("sk-b", "sk-moving"), Models: []string{"*"}},
		}
		cfg := &config.Config{Teams: []config.Team{teams[order[0]], teams[order[1]]}}
		next, changed, problems := SyncConfigKeys(cur, cfg, t0)
		if !changed || len(problems) > 0 {
			t.Fatalf("order %v: changed=%v problems=%v", order, changed, problems)
		}
		s := Build(&config.Config{}, next)
		if tm := s.Authenticate("sk-moving"); tm == nil || tm.Name != "b" {
			t.Fatalf("order %v: the moved key authenticates as %v, want team b", order, tm)
		}
		if p := next.KeyProblems(); len(p) > 0 {
			t.Fatalf("order %v: %v", order, p)
		}
	}
}
